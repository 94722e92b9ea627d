// .safetensors and .npy reading and writing (tensor/io.hpp). The JSON header of
// safetensors goes through nlohmann-json (Debian's nlohmann-json3-dev, header-only, used
// only here); the .npy header is a small Python dict literal parsed by hand below.
#include "tensor/io.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string_view>

namespace tensor {

FormatError::~FormatError() = default;

namespace io {
namespace {

static_assert(std::endian::native == std::endian::little, "the file formats store little-endian bytes as-is");

using ordered_json = nlohmann::ordered_json;

// The largest header either format accepts (safetensors' own reader caps it at 100 MB).
constexpr std::uint64_t kMaxHeader = 100u << 20;

// ---- files -----------------------------------------------------------------------------

std::vector<std::byte> read_file(const char* op, const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw FormatError(path, fmt::format("[{}] cannot open '{}': {}", op, path, std::strerror(errno)));
  std::vector<std::byte> out;
  std::byte buf[1 << 16];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.insert(out.end(), buf, buf + n);
  const bool err = std::ferror(f) != 0;
  std::fclose(f);
  if (err) throw FormatError(path, fmt::format("[{}] read error on '{}'", op, path));
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
const TensorData& storable(const TensorData& d, std::optional<TensorData>& converted) {
  if (d.dtype() == DType::BoolU8 || d.dtype() == DType::BoolU32) {
    converted = d.convert(DType::Bool);
    return *converted;
  }
  return d;
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

// Checked product of dims times the element size; nullopt on overflow.
std::optional<std::uint64_t> byte_count(const std::vector<std::uint64_t>& dims, std::size_t elem) {
  std::uint64_t n = elem;
  for (std::uint64_t d : dims) {
    if (d != 0 && n > std::numeric_limits<std::uint64_t>::max() / d) return std::nullopt;
    n *= d;
  }
  return n;
}

struct Entry {
  std::string name;
  DType dtype;
  std::vector<std::uint64_t> dims;
  std::uint64_t begin, end;
};

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
  ordered_json header = ordered_json::object();
  if (!metadata.empty()) {
    ordered_json m = ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = std::move(m);
  }
  std::vector<std::optional<TensorData>> converted(tensors.size());
  std::vector<const TensorData*> parts;
  std::set<std::string> seen;
  std::uint64_t offset = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, data] = tensors[i];
    if (name.empty() || name == "__metadata__")
      throw FormatError(path, fmt::format("[{}] invalid tensor name in '{}'; expected a non-empty name other than "
                                          "__metadata__; got '{}'", op, path, name));
    if (!seen.insert(name).second)
      throw FormatError(path, fmt::format("[{}] duplicate tensor name in '{}'; expected unique names; got '{}' twice",
                                          op, path, name));
    const TensorData& d = storable(data, converted[i]);
    const char* dt = st_dtype_name(d.dtype());
    if (!dt)
      throw DTypeError(fmt::format("[{}] tensor '{}' for '{}' has a dtype safetensors cannot store; expected a float, "
                                   "int or bool dtype; got {}", op, name, path, dtype_name(d.dtype())));
    ordered_json shape = ordered_json::array();
    for (std::size_t dim : d.shape()) shape.push_back(static_cast<std::uint64_t>(dim));
    const std::uint64_t end = offset + d.bytes().size();
    header[name] = ordered_json{{"dtype", dt}, {"shape", std::move(shape)}, {"data_offsets", {offset, end}}};
    offset = end;
    parts.push_back(&d);
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::vector<std::byte> head;
  head.reserve(8 + text.size());
  append_le(head, text.size(), 8);
  for (char c : text) head.push_back(static_cast<std::byte>(c));
  write_file(op, path, head, parts);
}

SafetensorsFile load_safetensors(const std::string& path) {
  constexpr const char* op = "load_safetensors";
  const std::vector<std::byte> file = read_file(op, path);
  auto fail = [&](const std::string& what) -> FormatError { return FormatError(path, fmt::format("[{}] '{}': {}", op, path, what)); };
  if (file.size() < 8)
    throw fail(fmt::format("truncated: no header length; expected at least 8 bytes; got {}", file.size()));
  const std::uint64_t n = read_le(file.data(), 8);
  if (n > kMaxHeader) throw fail(fmt::format("header length too large; expected at most {} bytes; got {}", kMaxHeader, n));
  if (n > file.size() - 8)
    throw fail(fmt::format("header length beyond the file; expected at most {} bytes; got {}", file.size() - 8, n));
  const char* text = reinterpret_cast<const char*>(file.data() + 8);
  const ordered_json header = ordered_json::parse(text, text + n, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded()) throw fail("the header is not valid JSON");
  if (!header.is_object()) throw fail(fmt::format("the header is not a JSON object; got a {}", header.type_name()));
  const std::uint64_t data_size = file.size() - 8 - n;

  SafetensorsFile out;
  std::vector<Entry> entries;
  for (const auto& [name, v] : header.items()) {
    if (name == "__metadata__") {
      if (!v.is_object()) throw fail("__metadata__ is not an object of strings");
      for (const auto& [k, s] : v.items()) {
        if (!s.is_string()) throw fail(fmt::format("__metadata__ value '{}' is not a string; got a {}", k, s.type_name()));
        out.metadata[k] = s.get<std::string>();
      }
      continue;
    }
    // A named copy: clang 14 cannot capture a structured binding in a lambda.
    const std::string& tensor_name = name;
    auto bad = [&](const std::string& what) { return fail(fmt::format("tensor '{}': {}", tensor_name, what)); };
    if (!v.is_object()) throw bad("the entry is not an object");
    if (!v.contains("dtype") || !v["dtype"].is_string()) throw bad("no \"dtype\" string");
    if (!v.contains("shape") || !v["shape"].is_array()) throw bad("no \"shape\" array");
    if (!v.contains("data_offsets") || !v["data_offsets"].is_array() || v["data_offsets"].size() != 2 ||
        !v["data_offsets"][0].is_number_unsigned() || !v["data_offsets"][1].is_number_unsigned())
      throw bad("no \"data_offsets\" [begin, end] of unsigned integers");
    Entry e{name, DType::F32, {}, v["data_offsets"][0].get<std::uint64_t>(), v["data_offsets"][1].get<std::uint64_t>()};
    const std::string dt = v["dtype"].get<std::string>();
    const StName* found = std::find_if(std::begin(kStNames), std::end(kStNames), [&](const StName& s) { return dt == s.name; });
    if (found == std::end(kStNames))
      throw bad(fmt::format("unknown dtype; expected F64, F32, F16, BF16, I64, I32, I16, I8, U64, U32, U16, U8 or BOOL; got \"{}\"", dt));
    e.dtype = found->dtype;
    for (const auto& d : v["shape"]) {
      if (!d.is_number_unsigned()) throw bad(fmt::format("shape entries must be unsigned integers; got {}", d.dump()));
      e.dims.push_back(d.get<std::uint64_t>());
    }
    if (e.dims.size() > kMaxRank) throw bad(fmt::format("rank too large; expected at most {}; got {}", kMaxRank, e.dims.size()));
    if (e.begin > e.end) throw bad(fmt::format("data_offsets out of order; expected begin <= end; got [{}, {}]", e.begin, e.end));
    if (e.end > data_size)
      throw bad(fmt::format("data_offsets beyond the file; expected end <= {} (the data size); got [{}, {}]", data_size, e.begin, e.end));
    const auto want = byte_count(e.dims, dtype_size(e.dtype));
    if (!want || *want != e.end - e.begin)
      throw bad(fmt::format("shape and dtype do not match the byte count; expected {} bytes; got [{}, {}] ({} bytes)",
                            want ? fmt::format("{}", *want) : std::string("an overflowing number of"), e.begin, e.end, e.end - e.begin));
    entries.push_back(std::move(e));
  }
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

  const std::byte* data = file.data() + 8 + n;
  out.tensors.reserve(entries.size());
  for (const Entry& e : entries) {
    std::vector<std::size_t> dims(e.dims.begin(), e.dims.end());
    std::vector<std::byte> bytes(data + e.begin, data + e.end);
    out.tensors.emplace_back(e.name, TensorData(std::move(bytes), Shape(dims), e.dtype));
  }
  return out;
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
  std::optional<TensorData> converted;
  const TensorData& d = storable(data, converted);
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
}

TensorData load_npy(const std::string& path) {
  constexpr const char* op = "load_npy";
  const std::vector<std::byte> file = read_file(op, path);
  auto fail = [&](const std::string& what) { return FormatError(path, fmt::format("[{}] '{}': {}", op, path, what)); };
  if (file.size() < 10 || std::memcmp(file.data(), kNpyMagic, 6) != 0)
    throw fail("not a .npy file; expected the magic \\x93NUMPY and a version");
  const int major = static_cast<int>(file[6]);
  if (major < 1 || major > 3) throw fail(fmt::format("unsupported version; expected 1, 2 or 3; got {}", major));
  const std::size_t len_bytes = major == 1 ? 2 : 4;
  if (file.size() < 8 + len_bytes) throw fail("truncated: no header length");
  const std::uint64_t n = read_le(file.data() + 8, len_bytes);
  const std::size_t start = 8 + len_bytes;
  if (n > file.size() - start)
    throw fail(fmt::format("header length beyond the file; expected at most {} bytes; got {}", file.size() - start, n));
  DictParser p{std::string_view(reinterpret_cast<const char*>(file.data() + start), n)};
  std::optional<std::string> descr;
  std::optional<bool> fortran;
  std::optional<std::vector<std::uint64_t>> dims;
  if (!p.eat('{')) throw fail("the header is not a dict");
  while (!p.eat('}')) {
    const auto key = p.str();
    if (!key || !p.eat(':')) throw fail("the header dict is malformed");
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
  const std::uint64_t have = file.size() - start - n;
  if (!bytes || *bytes != have)
    throw fail(fmt::format("data size does not match the shape; expected {} bytes; got {}",
                           bytes ? fmt::format("{}", *bytes) : std::string("an overflowing number of"), have));
  const std::byte* data = file.data() + start + n;
  std::vector<std::size_t> shape(dims->begin(), dims->end());
  return TensorData(std::vector<std::byte>(data, data + have), Shape(shape), found->dtype);
}

}  // namespace io
}  // namespace tensor
