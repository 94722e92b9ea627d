// .safetensors and .npy reading and writing (tensor/io.hpp). The JSON header of
// safetensors goes through nlohmann-json (Debian's nlohmann-json3-dev, header-only, used
// only here); the .npy header is a small Python dict literal parsed by hand below.
#include "tensor/io.hpp"

#include "lib/src/io_quant.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <new>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_set>

#include <sys/stat.h>
#include <sys/sysinfo.h>

namespace tensor {

FormatError::~FormatError() = default;

namespace io {
namespace {

static_assert(std::endian::native == std::endian::little, "the file formats store little-endian bytes as-is");

// The largest header either format accepts (safetensors' own reader caps it at 100 MB).
constexpr std::uint64_t kMaxHeader = 100u << 20;

// ---- files -----------------------------------------------------------------------------

// Every failure of a load or save is a tensor::Error whose message starts with the op the user
// called; this net turns what the standard library or nlohmann-json may still throw into one.
template <class F>
auto guarded(const char* op, const std::string& path, F&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw ExecutionError(fmt::format("[{}] '{}': out of host memory; expected an allocation to succeed; got std::bad_alloc", op, path));
  } catch (const std::exception& e) {
    throw FormatError(path, fmt::format("[{}] '{}': unexpected failure; expected none; got {}", op, path, e.what()));
  }
}

// A file opened for reading whose size is known before anything is allocated for it, read
// in pieces: a header that claims more than the file holds fails before the allocation.
class InFile {
 public:
  InFile(const char* op, const std::string& path) : op_(op), path_(path), f_(std::fopen(path.c_str(), "rb")) {
    if (!f_) throw FormatError(path, fmt::format("[{}] cannot open '{}': {}", op, path, std::strerror(errno)));
    struct stat st {};
    if (::fstat(::fileno(f_), &st) != 0 || !S_ISREG(st.st_mode)) {
      std::fclose(f_);
      throw FormatError(path, fmt::format("[{}] cannot read '{}'; expected a regular file; got {}", op, path,
                                          S_ISDIR(st.st_mode) ? "a directory" : "another kind of file"));
    }
    size_ = static_cast<std::uint64_t>(st.st_size);
  }
  InFile(const InFile&) = delete;
  InFile& operator=(const InFile&) = delete;
  ~InFile() { std::fclose(f_); }

  std::uint64_t size() const { return size_; }
  // Exactly n bytes from the current position; FormatError when the file ends first (it shrank
  // since it was opened) or the read fails.
  void read(void* dst, std::size_t n) {
    if (n == 0) return;
    if (std::fread(dst, 1, n, f_) != n)
      throw FormatError(path_, fmt::format("[{}] read error on '{}'; expected {} more bytes; got {}", op_, path_, n,
                                           std::ferror(f_) ? std::strerror(errno) : "the end of the file"));
  }

 private:
  const char* op_;
  const std::string& path_;
  std::FILE* f_;
  std::uint64_t size_ = 0;
};

// RAM plus swap: data larger than this cannot be held, whatever the allocator promises (with
// overcommit an allocation may succeed and the process be killed while filling it).
std::uint64_t host_memory_bytes() {
  struct sysinfo si {};
  if (::sysinfo(&si) != 0) return std::numeric_limits<std::uint64_t>::max();
  return (static_cast<std::uint64_t>(si.totalram) + si.totalswap) * si.mem_unit;
}

void check_host_memory(const char* op, const std::string& path, std::uint64_t need) {
  const std::uint64_t have = host_memory_bytes();
  if (need > have)
    throw ExecutionError(fmt::format("[{}] '{}': the tensor data does not fit in host memory; expected at most {} bytes "
                                     "(RAM + swap); got {} bytes", op, path, have, need));
}

// `n` bytes read from `in` into a new buffer; ExecutionError when they cannot be allocated.
std::vector<std::byte> read_bytes(const char* op, const std::string& path, InFile& in, std::uint64_t n) {
  std::vector<std::byte> out;
  try {
    out.resize(static_cast<std::size_t>(n));
  } catch (const std::bad_alloc&) {
    throw ExecutionError(fmt::format("[{}] '{}': out of host memory; expected {} bytes for the tensor data; got an "
                                     "allocation failure", op, path, n));
  }
  in.read(out.data(), out.size());
  return out;
}

// Writes path.tmp, then renames it over path: no partial file on failure.
void write_file(const char* op, const std::string& path, const std::vector<std::byte>& head,
                const std::vector<const TensorData*>& parts) {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw FormatError(path, fmt::format("[{}] cannot create '{}': {}", op, tmp, std::strerror(errno)));
  bool ok = std::fwrite(head.data(), 1, head.size(), f) == head.size();
  for (const TensorData* d : parts)
    ok = ok && (d->bytes().empty() || std::fwrite(d->bytes().data(), 1, d->bytes().size(), f) == d->bytes().size());
  ok = (std::fclose(f) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw FormatError(path, fmt::format("[{}] cannot write '{}': {}", op, path, std::strerror(errno)));
  }
}

std::uint64_t read_le(const std::byte* p, std::size_t n) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < n; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return v;
}
void append_le(std::vector<std::byte>& out, std::uint64_t v, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xffu));
}

// Bool storages are written one byte per element; everything else as stored.
const TensorData& storable(const char* op, const TensorData& d, std::optional<TensorData>& converted) {
  if (d.dtype() == DType::BoolU8 || d.dtype() == DType::BoolU32) {
    try {
      converted = d.convert(DType::Bool);
    } catch (const ExecutionError&) {
      throw ExecutionError(fmt::format("[{}] out of host memory converting {} data of shape {} to one byte per element; "
                                       "expected {} bytes; got an allocation failure",
                                       op, dtype_name(d.dtype()), d.shape().to_string(), d.num_elements()));
    }
    return *converted;
  }
  return d;
}

// The shape of a loaded tensor, checked as TensorData checks it (the product of the nonzero dims
// and the byte count at most 2^63 - 1), so building the TensorData cannot throw; the byte count
// of the shape, or a message saying why there is none.
std::optional<std::uint64_t> byte_count(const std::vector<std::uint64_t>& dims, std::size_t elem) {
  std::uint64_t n = 1;
  bool zero = false;
  for (std::uint64_t d : dims) {
    if (d == 0) { zero = true; continue; }
    if (d > kMaxElements / n) return std::nullopt;
    n *= d;
  }
  if (n > kMaxElements / elem) return std::nullopt;
  return zero ? 0 : n * elem;
}

std::string dims_string(const std::vector<std::uint64_t>& dims) {
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) s += fmt::format("{}{}", i ? ", " : "", dims[i]);
  return s + "]";
}

// ---- safetensors -----------------------------------------------------------------------

struct StName { DType dtype; const char* name; };
constexpr StName kStNames[] = {
    {DType::F64, "F64"}, {DType::F32, "F32"}, {DType::F16, "F16"}, {DType::BF16, "BF16"},
    {DType::I64, "I64"}, {DType::I32, "I32"}, {DType::I16, "I16"}, {DType::I8, "I8"},
    {DType::U64, "U64"}, {DType::U32, "U32"}, {DType::U16, "U16"}, {DType::U8, "U8"},
    {DType::Bool, "BOOL"},
};

const char* st_dtype_name(DType t) {
  for (const StName& s : kStNames)
    if (s.dtype == t) return s.name;
  return nullptr;
}

// A header nests three levels ({name: {"shape": [...]}}); anything much deeper is hostile,
// and nlohmann-json recurses per level when it copies, prints or frees a value.
constexpr int kMaxJsonDepth = 64;

// The deepest bracket nesting of `text` outside strings, or -1 once it passes `limit`.
int json_depth(std::string_view text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '{' || c == '[') {
      if (++depth > limit) return -1;
      deepest = std::max(deepest, depth);
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return deepest;
}

// `s` quoted for a message, ASCII only: bytes that are not UTF-8 shown as U+FFFD.
std::string shown(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', /*ensure_ascii=*/true, nlohmann::json::error_handler_t::replace);
}

// A JSON string literal for `s` (quotes and escapes as nlohmann-json writes them); FormatError
// naming `what` when `s` is not valid UTF-8, which JSON cannot hold.
std::string json_string(const char* op, const std::string& path, const std::string& what, const std::string& s) {
  try {
    return nlohmann::json(s).dump();
  } catch (const nlohmann::json::type_error& e) {
    throw FormatError(path, fmt::format("[{}] {} for '{}' is not valid UTF-8; expected UTF-8 text (JSON holds nothing "
                                        "else); got {} ({})", op, what, path, shown(s), e.what()));
  }
}

struct Entry {
  std::string name;
  DType dtype;
  std::vector<std::uint64_t> dims;
  std::uint64_t begin, end;
};

// One pass over the header's events (nlohmann-json's SAX interface, no values built): the
// top-level keys in file order, and the first key repeated within one object.
struct KeyScan {
  using json = nlohmann::json;
  std::vector<std::unordered_set<std::string>> open;  // keys seen in each open object, innermost last
  std::vector<std::string> top;
  std::optional<std::string> duplicate;

  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(json::number_integer_t) { return true; }
  bool number_unsigned(json::number_unsigned_t) { return true; }
  bool number_float(json::number_float_t, const json::string_t&) { return true; }
  bool string(json::string_t&) { return true; }
  bool binary(json::binary_t&) { return true; }
  bool start_object(std::size_t) { open.emplace_back(); return true; }
  bool end_object() { open.pop_back(); return true; }
  bool start_array(std::size_t) { return true; }
  bool end_array() { return true; }
  bool key(json::string_t& k) {
    if (!open.back().insert(k).second && !duplicate) duplicate = open.size() == 1 ? k : k + " (in an entry)";
    if (open.size() == 1) top.push_back(k);
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) { return false; }
};

// The parsed header: the JSON and its top-level keys in file order. nlohmann::json keeps keys
// sorted in a std::map (logarithmic lookups); ordered_json's linear key search, and the parser
// callback's scan of the parent object at every object's end, each made n tensors cost O(n^2).
struct Header {
  nlohmann::json json;
  std::vector<std::string> keys;
};

Header parse_header(std::string_view text, const std::function<FormatError(const std::string&)>& fail) {
  if (json_depth(text, kMaxJsonDepth) < 0)
    throw fail(fmt::format("the header nests JSON too deeply; expected at most {} levels of objects and arrays; got more",
                           kMaxJsonDepth));
  Header h;
  h.json = nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (h.json.is_discarded()) throw fail("the header is not valid JSON");
  if (!h.json.is_object()) throw fail(fmt::format("the header is not a JSON object; got a {}", h.json.type_name()));
  // A repeated key is refused: JSON parsers disagree on which of the two wins.
  KeyScan scan;
  if (!nlohmann::json::sax_parse(text.begin(), text.end(), &scan)) throw fail("the header is not valid JSON");
  if (scan.duplicate)
    throw fail(fmt::format("duplicate key in the header; expected each tensor name (and each key of an entry) once; "
                           "got '{}' twice", *scan.duplicate));
  h.keys = std::move(scan.top);
  return h;
}

}  // namespace

const TensorData& SafetensorsFile::at(const std::string& name) const {
  for (const auto& [n, d] : tensors)
    if (n == name) return d;
  throw IndexError(fmt::format("[SafetensorsFile::at] no tensor named '{}'; expected one of the {} names in the file; got '{}'",
                               name, tensors.size(), name));
}

bool SafetensorsFile::contains(const std::string& name) const {
  return std::any_of(tensors.begin(), tensors.end(), [&](const auto& p) { return p.first == name; });
}

void save_safetensors(const std::string& path, const NamedTensors& tensors, const std::map<std::string, std::string>& metadata) {
  constexpr const char* op = "save_safetensors";
  guarded(op, path, [&] {
    // A quantized tensor is stored as its codes and its scales plus a metadata string
    // (io_quant.cpp); a list without one is written as given, without a copy.
    NamedTensors split_list;
    std::map<std::string, std::string> split_metadata;
    const bool quantized = detail::has_quantized(tensors);
    if (quantized) {
      split_list = tensors;
      split_metadata = metadata;
      detail::split_quantized(op, path, split_list, split_metadata);
    }
    const NamedTensors& tensors_out = quantized ? split_list : tensors;
    const std::map<std::string, std::string>& metadata_out = quantized ? split_metadata : metadata;
    // The header text is written piece by piece in the given order (one pass; a JSON object
    // built key by key would search its keys on every insertion).
    std::string text = "{";
    if (!metadata_out.empty()) {
      text += "\"__metadata__\":{";
      bool first = true;
      for (const auto& [k, v] : metadata_out) {
        text += first ? "" : ",";
        text += json_string(op, path, "a metadata key", k);
        text += ':';
        text += json_string(op, path, "the metadata value of " + shown(k), v);
        first = false;
      }
      text += '}';
    }
    std::vector<std::optional<TensorData>> converted(tensors_out.size());
    std::vector<const TensorData*> parts;
    std::unordered_set<std::string_view> seen;
    std::uint64_t offset = 0;
    for (std::size_t i = 0; i < tensors_out.size(); ++i) {
      const auto& [name, data] = tensors_out[i];
      const std::string key = json_string(op, path, "a tensor name", name);
      if (name.empty() || name == "__metadata__")
        throw FormatError(path, fmt::format("[{}] invalid tensor name in '{}'; expected a non-empty name other than "
                                            "__metadata__; got '{}'", op, path, name));
      if (!seen.insert(name).second)
        throw FormatError(path, fmt::format("[{}] duplicate tensor name in '{}'; expected unique names; got '{}' twice",
                                            op, path, name));
      const TensorData& d = storable(op, data, converted[i]);
      const char* dt = st_dtype_name(d.dtype());
      if (!dt)
        throw DTypeError(fmt::format("[{}] tensor '{}' for '{}' has a dtype safetensors cannot store; expected a float, "
                                     "int or bool dtype; got {}", op, name, path, dtype_name(d.dtype())));
      std::string shape;
      for (std::size_t dim : d.shape()) shape += fmt::format("{}{}", shape.empty() ? "" : ",", dim);
      const std::uint64_t end = offset + d.bytes().size();
      text += fmt::format("{}{}:{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}", text.size() > 1 ? "," : "",
                          key, dt, shape, offset, end);
      offset = end;
      parts.push_back(&d);
    }
    text += '}';
    text.append((8 - text.size() % 8) % 8, ' ');
    std::vector<std::byte> head;
    head.reserve(8 + text.size());
    append_le(head, text.size(), 8);
    for (char c : text) head.push_back(static_cast<std::byte>(c));
    write_file(op, path, head, parts);
  });
}

SafetensorsFile load_safetensors(const std::string& path) {
  constexpr const char* op = "load_safetensors";
  return guarded(op, path, [&] {
    InFile in(op, path);
    const std::function<FormatError(const std::string&)> fail = [&](const std::string& what) {
      return FormatError(path, fmt::format("[{}] '{}': {}", op, path, what));
    };
    if (in.size() < 8)
      throw fail(fmt::format("truncated: no header length; expected at least 8 bytes; got {}", in.size()));
    std::byte len[8];
    in.read(len, 8);
    const std::uint64_t n = read_le(len, 8);
    if (n > kMaxHeader) throw fail(fmt::format("header length too large; expected at most {} bytes; got {}", kMaxHeader, n));
    if (n > in.size() - 8)
      throw fail(fmt::format("header length beyond the file; expected at most {} bytes; got {}", in.size() - 8, n));
    std::string text(static_cast<std::size_t>(n), '\0');
    in.read(text.data(), text.size());
    const Header header = parse_header(text, fail);
    const std::uint64_t data_size = in.size() - 8 - n;

    SafetensorsFile out;
    std::vector<Entry> entries;
    entries.reserve(header.keys.size());
    for (const std::string& name : header.keys) {
      const nlohmann::json& v = header.json.find(name).value();
      if (name == "__metadata__") {
        if (!v.is_object()) throw fail("__metadata__ is not an object of strings");
        for (const auto& [k, s] : v.items()) {
          if (!s.is_string()) throw fail(fmt::format("__metadata__ value '{}' is not a string; got a {}", k, s.type_name()));
          out.metadata[k] = s.get<std::string>();
        }
        continue;
      }
      auto bad = [&](const std::string& what) { return fail(fmt::format("tensor '{}': {}", name, what)); };
      if (!v.is_object()) throw bad("the entry is not an object");
      if (!v.contains("dtype") || !v["dtype"].is_string()) throw bad("no \"dtype\" string");
      if (!v.contains("shape") || !v["shape"].is_array()) throw bad("no \"shape\" array");
      if (!v.contains("data_offsets") || !v["data_offsets"].is_array() || v["data_offsets"].size() != 2 ||
          !v["data_offsets"][0].is_number_unsigned() || !v["data_offsets"][1].is_number_unsigned())
        throw bad("no \"data_offsets\" [begin, end] of unsigned integers");
      Entry e{name, DType::F32, {}, v["data_offsets"][0].get<std::uint64_t>(), v["data_offsets"][1].get<std::uint64_t>()};
      const std::string& dt = v["dtype"].get_ref<const std::string&>();
      const StName* found = std::find_if(std::begin(kStNames), std::end(kStNames), [&](const StName& s) { return dt == s.name; });
      if (found == std::end(kStNames))
        throw bad(fmt::format("unknown dtype; expected F64, F32, F16, BF16, I64, I32, I16, I8, U64, U32, U16, U8 or BOOL; got \"{}\"", dt));
      e.dtype = found->dtype;
      if (v["shape"].size() > kMaxRank) throw bad(fmt::format("rank too large; expected at most {}; got {}", kMaxRank, v["shape"].size()));
      for (const auto& d : v["shape"]) {
        if (!d.is_number_unsigned()) throw bad(fmt::format("shape entries must be unsigned integers; got {}", d.dump()));
        e.dims.push_back(d.get<std::uint64_t>());
      }
      if (e.begin > e.end) throw bad(fmt::format("data_offsets out of order; expected begin <= end; got [{}, {}]", e.begin, e.end));
      if (e.end > data_size)
        throw bad(fmt::format("data_offsets beyond the file; expected end <= {} (the data size); got [{}, {}]", data_size, e.begin, e.end));
      const auto want = byte_count(e.dims, dtype_size(e.dtype));
      if (!want)
        throw bad(fmt::format("shape too large (an overflowing number of elements or bytes); expected at most 2^63 - 1 of each; "
                              "got shape {} of {}",
                              dims_string(e.dims), dtype_name(e.dtype)));
      if (*want != e.end - e.begin)
        throw bad(fmt::format("shape and dtype do not match the byte count; expected {} bytes; got [{}, {}] ({} bytes)", *want,
                              e.begin, e.end, e.end - e.begin));
      entries.push_back(std::move(e));
    }
    // Back to back in offset order: no overlap, no gap. Empty tensors may share an offset (the
    // writer gives consecutive empty tensors the same one).
    std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.begin < b.begin; });
    std::uint64_t at = 0;
    for (const Entry& e : entries) {
      if (e.begin < at)
        throw fail(fmt::format("tensor '{}': data_offsets overlap the previous tensor; expected begin {}; got [{}, {}]", e.name, at,
                               e.begin, e.end));
      if (e.begin > at)
        throw fail(fmt::format("tensor '{}': data_offsets leave a gap before it; expected begin {}; got [{}, {}]", e.name, at,
                               e.begin, e.end));
      at = e.end;
    }
    if (at != data_size)
      throw fail(fmt::format("trailing bytes after the last tensor; expected {} data bytes; got {}", at, data_size));
    check_host_memory(op, path, data_size);

    out.tensors.reserve(entries.size());
    for (const Entry& e : entries) {
      std::vector<std::size_t> dims(e.dims.begin(), e.dims.end());
      out.tensors.emplace_back(e.name, TensorData(read_bytes(op, path, in, e.end - e.begin), Shape(dims), e.dtype));
    }
    detail::join_quantized(op, path, out);
    return out;
  });
}

// ---- npy -------------------------------------------------------------------------------

namespace {

struct NpyName { DType dtype; const char* descr; };
constexpr NpyName kNpyNames[] = {
    {DType::F64, "<f8"}, {DType::F32, "<f4"}, {DType::F16, "<f2"},
    {DType::I64, "<i8"}, {DType::I32, "<i4"}, {DType::I16, "<i2"}, {DType::I8, "|i1"},
    {DType::U64, "<u8"}, {DType::U32, "<u4"}, {DType::U16, "<u2"}, {DType::U8, "|u1"},
    {DType::Bool, "|b1"},
};

// A cursor over the header dict: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
struct DictParser {
  std::string_view s;
  std::size_t i = 0;
  void ws() { while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n')) ++i; }
  bool eat(char c) { ws(); if (i < s.size() && s[i] == c) { ++i; return true; } return false; }
  std::optional<std::string> str() {
    ws();
    if (i >= s.size() || (s[i] != '\'' && s[i] != '"')) return std::nullopt;
    const char q = s[i++];
    const std::size_t start = i;
    while (i < s.size() && s[i] != q) ++i;
    if (i >= s.size()) return std::nullopt;
    return std::string(s.substr(start, i++ - start));
  }
  std::optional<bool> boolean() {
    ws();
    if (s.substr(i, 4) == "True") { i += 4; return true; }
    if (s.substr(i, 5) == "False") { i += 5; return false; }
    return std::nullopt;
  }
  std::optional<std::vector<std::uint64_t>> tuple() {
    if (!eat('(')) return std::nullopt;
    std::vector<std::uint64_t> out;
    while (true) {
      if (eat(')')) return out;
      ws();
      if (i >= s.size() || s[i] < '0' || s[i] > '9') return std::nullopt;
      std::uint64_t v = 0;
      while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
        const std::uint64_t digit = static_cast<std::uint64_t>(s[i++] - '0');
        if (v > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) return std::nullopt;
        v = v * 10 + digit;
      }
      out.push_back(v);
      if (!eat(',') && !(ws(), i < s.size() && s[i] == ')')) return std::nullopt;
    }
  }
};

const char kNpyMagic[] = "\x93NUMPY";

}  // namespace

void save_npy(const std::string& path, const TensorData& data) {
  constexpr const char* op = "save_npy";
  guarded(op, path, [&] {
    std::optional<TensorData> converted;
    const TensorData& d = storable(op, data, converted);
    const NpyName* found =
        std::find_if(std::begin(kNpyNames), std::end(kNpyNames), [&](const NpyName& n) { return n.dtype == d.dtype(); });
    if (found == std::end(kNpyNames))
      throw DTypeError(fmt::format("[{}] '{}': numpy has no dtype for this data; expected a dtype other than bf16 and qfloat; got {}",
                                   op, path, dtype_name(d.dtype())));
    std::string shape;
    for (std::size_t dim : d.shape()) shape += fmt::format("{}, ", dim);
    if (d.shape().rank() > 1) shape.resize(shape.size() - 2);  // (3,) keeps its comma, (2, 3) does not
    if (d.shape().rank() == 1) shape.pop_back();
    std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", found->descr, shape);
    // magic(6) + version(2) + length(2 or 4) + dict + padding + '\n' is a multiple of 64.
    std::size_t prefix = 10;
    std::size_t total = (prefix + dict.size() + 1 + 63) / 64 * 64;
    if (total - prefix > 0xffff) {
      prefix = 12;
      total = (prefix + dict.size() + 1 + 63) / 64 * 64;
    }
    dict.append(total - prefix - dict.size() - 1, ' ');
    dict.push_back('\n');
    std::vector<std::byte> head;
    for (int k = 0; k < 6; ++k) head.push_back(static_cast<std::byte>(kNpyMagic[k]));
    head.push_back(std::byte{static_cast<unsigned char>(prefix == 10 ? 1 : 2)});
    head.push_back(std::byte{0});
    append_le(head, dict.size(), prefix == 10 ? 2 : 4);
    for (char c : dict) head.push_back(static_cast<std::byte>(c));
    write_file(op, path, head, {&d});
  });
}

TensorData load_npy(const std::string& path) {
  constexpr const char* op = "load_npy";
  return guarded(op, path, [&] {
    InFile in(op, path);
    auto fail = [&](const std::string& what) { return FormatError(path, fmt::format("[{}] '{}': {}", op, path, what)); };
    std::byte pre[12];
    if (in.size() < 10) throw fail("not a .npy file; expected the magic \\x93NUMPY and a version");
    in.read(pre, 8);
    if (std::memcmp(pre, kNpyMagic, 6) != 0) throw fail("not a .npy file; expected the magic \\x93NUMPY and a version");
    const int major = static_cast<int>(pre[6]);
    if (major < 1 || major > 3) throw fail(fmt::format("unsupported version; expected 1, 2 or 3; got {}", major));
    const std::size_t len_bytes = major == 1 ? 2 : 4;
    if (in.size() < 8 + len_bytes) throw fail("truncated: no header length");
    in.read(pre + 8, len_bytes);
    const std::uint64_t n = read_le(pre + 8, len_bytes);
    const std::size_t start = 8 + len_bytes;
    if (n > in.size() - start)
      throw fail(fmt::format("header length beyond the file; expected at most {} bytes; got {}", in.size() - start, n));
    if (n > kMaxHeader) throw fail(fmt::format("header length too large; expected at most {} bytes; got {}", kMaxHeader, n));
    std::string text(static_cast<std::size_t>(n), '\0');
    in.read(text.data(), text.size());
    DictParser p{text};
    std::optional<std::string> descr;
    std::optional<bool> fortran;
    std::optional<std::vector<std::uint64_t>> dims;
    std::set<std::string> keys;
    if (!p.eat('{')) throw fail("the header is not a dict");
    while (!p.eat('}')) {
      const auto key = p.str();
      if (!key || !p.eat(':')) throw fail("the header dict is malformed");
      if (!keys.insert(*key).second) throw fail(fmt::format("duplicate header key; expected each key once; got '{}' twice", *key));
      if (*key == "descr") descr = p.str();
      else if (*key == "fortran_order") fortran = p.boolean();
      else if (*key == "shape") dims = p.tuple();
      else throw fail(fmt::format("unexpected header key '{}'", *key));
      if ((*key == "descr" && !descr) || (*key == "fortran_order" && !fortran) || (*key == "shape" && !dims))
        throw fail(fmt::format("header value of '{}' is malformed", *key));
      if (!p.eat(',') && !(p.ws(), p.i < p.s.size() && p.s[p.i] == '}')) throw fail("the header dict is malformed");
    }
    if (!descr || !fortran || !dims) throw fail("the header lacks one of 'descr', 'fortran_order', 'shape'");
    if (*fortran) throw fail("fortran_order True is not supported; expected C order (fortran_order False)");
    std::string want = *descr;
    if (!want.empty() && (want[0] == '=' || want[0] == '|')) want[0] = '<';
    const NpyName* found = std::find_if(std::begin(kNpyNames), std::end(kNpyNames), [&](const NpyName& e) {
      std::string d = e.descr;
      d[0] = '<';
      return d == want;
    });
    if (found == std::end(kNpyNames))
      throw fail(fmt::format("unsupported dtype; expected a little-endian bool, int, uint or float (f2, f4, f8); got '{}'", *descr));
    if (dims->size() > kMaxRank) throw fail(fmt::format("rank too large; expected at most {}; got {}", kMaxRank, dims->size()));
    const auto bytes = byte_count(*dims, dtype_size(found->dtype));
    if (!bytes)
      throw fail(fmt::format("shape too large (an overflowing number of elements or bytes); expected at most 2^63 - 1 of each; "
                              "got shape {} of {}",
                             dims_string(*dims), dtype_name(found->dtype)));
    const std::uint64_t have = in.size() - start - n;
    if (*bytes != have)
      throw fail(fmt::format("data size does not match the shape; expected {} bytes; got {}", *bytes, have));
    check_host_memory(op, path, have);
    std::vector<std::size_t> shape(dims->begin(), dims->end());
    return TensorData(read_bytes(op, path, in, have), Shape(shape), found->dtype);
  });
}

}  // namespace io
}  // namespace tensor
