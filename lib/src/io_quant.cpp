// Quantized tensors in .safetensors files (lib/src/io_quant.hpp). safetensors has no
// quantized dtype, so a QFloat tensor travels as two plain tensors and one metadata string:
//
//   <name>          the codes: I8 of the tensor's shape (Native store), or U32 words of the
//                   shape with its last axis counted in words (PackedU32: burn's byte layout,
//                   each line of the last axis packed on its own)
//   <name>.qscales  the scales: F32 / F16 / BF16 (the scheme's scale dtype) of the block grid
//                   (params_shape: [1] per tensor)
//   __metadata__["qscheme.<name>"] = {"shape": [...], "value": "q4s", "store": "packed-u32",
//                   "param": "f16", "block": [32, 1] or null, "scales": "<name>.qscales"}
//
// The two byte runs are exactly TensorData::quantized's codes and scales, so a load joins them
// back byte for byte, and another tool reads the codes and scales as ordinary tensors.
#include "lib/src/io_quant.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "dispatch/quant_model.hpp"

namespace tensor::io::detail {
namespace {

namespace q = dispatch::quant;

using q::kValueNames;
constexpr const auto& kParamNames = q::kScaleNames;
constexpr DType kParamDtypes[] = {DType::F32, DType::F16, DType::BF16};

template <class E, std::size_t N>
const char* name_of(const char* const (&names)[N], E e) {
  const auto i = static_cast<std::size_t>(e);
  return i < N ? names[i] : "?";
}

// The shape the codes are stored under: the tensor's (Native), or its last axis in u32 words
// (PackedU32; a scalar is one word).
Shape code_shape(const QuantScheme& s, const Shape& shape) {
  if (s.store == QuantStore::Native) return shape;
  const std::size_t per_word = static_cast<std::size_t>(s.num_quants());
  if (shape.rank() == 0) return Shape{1};
  std::vector<std::size_t> dims(shape.begin(), shape.end());
  dims.back() = (dims.back() + per_word - 1) / per_word;
  return Shape(dims);
}

DType code_dtype(const QuantScheme& s) { return s.store == QuantStore::Native ? DType::I8 : DType::U32; }

std::string scheme_json(const std::string& scales_name, const Shape& shape, const QuantScheme& s) {
  nlohmann::json j;
  j["shape"] = std::vector<std::size_t>(shape.begin(), shape.end());
  j["value"] = name_of(kValueNames, s.value);
  j["store"] = q::kStoreNames[s.store == QuantStore::Native ? 0 : 1];
  j["param"] = name_of(kParamNames, s.param);
  if (s.level.is_block())
    j["block"] = std::vector<std::uint32_t>(s.level.shape.dims.begin(), s.level.shape.dims.begin() + s.level.shape.rank);
  else
    j["block"] = nullptr;
  j["scales"] = scales_name;
  return j.dump();
}

// The index of `name` among the tensors, or npos.
std::size_t find(const NamedTensors& t, const std::string& name) {
  for (std::size_t i = 0; i < t.size(); ++i)
    if (t[i].first == name) return i;
  return static_cast<std::size_t>(-1);
}

template <std::size_t N>
std::size_t index_of(const char* const (&names)[N], const std::string& s) {
  for (std::size_t i = 0; i < N; ++i)
    if (s == names[i]) return i;
  return N;
}

}  // namespace

bool has_quantized(const NamedTensors& tensors) {
  return std::any_of(tensors.begin(), tensors.end(), [](const auto& p) { return p.second.dtype() == DType::QFloat; });
}

void split_quantized(const char* op, const std::string& path, NamedTensors& tensors, std::map<std::string, std::string>& metadata) {
  NamedTensors out;
  out.reserve(tensors.size() + 4);
  for (auto& [name, data] : tensors) {
    if (data.dtype() != DType::QFloat) {
      out.emplace_back(name, std::move(data));
      continue;
    }
    const QuantScheme& s = *data.quant_scheme();
    const std::string scales_name = name + kScalesSuffix, key = kSchemeKeyPrefix + name;
    if (metadata.count(key))
      throw FormatError(path, fmt::format("[{}] metadata key '{}' is reserved for quantized tensor '{}' in '{}'; expected "
                                          "no such key in the metadata; got one",
                                          op, key, name, path));
    const std::size_t codes = q::code_bytes(s, data.shape());
    const std::vector<std::byte>& b = data.bytes();
    // TensorData::quantized checked the length, so the split is exact.
    std::vector<std::byte> code_bytes(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(codes));
    std::vector<std::byte> scale_bytes(b.begin() + static_cast<std::ptrdiff_t>(codes), b.end());
    const Shape grid = q::grid_shape(op, data.shape(), s);
    metadata[key] = scheme_json(scales_name, data.shape(), s);
    const Shape shape = data.shape();
    out.emplace_back(name, TensorData(std::move(code_bytes), code_shape(s, shape), code_dtype(s)));
    out.emplace_back(scales_name, TensorData(std::move(scale_bytes), grid, kParamDtypes[static_cast<std::size_t>(s.param)]));
  }
  tensors = std::move(out);
}

void join_quantized(const char* op, const std::string& path, SafetensorsFile& file) {
  std::vector<std::string> keys;
  for (const auto& [k, v] : file.metadata)
    if (k.starts_with(kSchemeKeyPrefix)) keys.push_back(k);
  std::vector<bool> drop(file.tensors.size(), false), used(file.tensors.size(), false);
  for (const std::string& key : keys) {
    const std::string name = key.substr(std::string_view(kSchemeKeyPrefix).size());
    auto bad = [&](const std::string& what) {
      return FormatError(path, fmt::format("[{}] '{}': quantized tensor '{}': {}", op, path, name, what));
    };
    nlohmann::json j = nlohmann::json::parse(file.metadata[key], nullptr, false);
    if (j.is_discarded() || !j.is_object()) throw bad("metadata '" + key + "' is not a JSON object");
    auto str = [&](const char* field) -> std::string {
      if (!j.contains(field) || !j[field].is_string()) throw bad(fmt::format("no \"{}\" string in its metadata", field));
      return j[field].get<std::string>();
    };
    auto uints = [&](const char* field, std::size_t most) {
      std::vector<std::uint64_t> v;
      if (!j[field].is_array() || j[field].size() > most)
        throw bad(fmt::format("\"{}\" is not an array of at most {} unsigned integers", field, most));
      for (const auto& d : j[field]) {
        if (!d.is_number_unsigned()) throw bad(fmt::format("\"{}\" holds {}; expected unsigned integers", field, d.dump()));
        v.push_back(d.get<std::uint64_t>());
      }
      return v;
    };
    QuantScheme s;
    const std::string value = str("value"), store = str("store"), param = str("param"), scales_name = str("scales");
    const std::size_t vi = index_of(kValueNames, value), pi = index_of(kParamNames, param);
    if (vi == std::size(kValueNames)) throw bad("unknown value \"" + value + "\"; expected q8f, q8s, q4f, q4s, q2f or q2s");
    if (pi == std::size(kParamNames)) throw bad("unknown param \"" + param + "\"; expected f32, f16 or bf16");
    const std::size_t si_store = index_of(q::kStoreNames, store);
    if (si_store == std::size(q::kStoreNames)) throw bad("unknown store \"" + store + "\"; expected native or packed-u32");
    s.value = static_cast<QuantValue>(vi);
    s.param = static_cast<ScaleDtype>(pi);
    s.store = si_store == 0 ? QuantStore::Native : QuantStore::PackedU32;
    if (!j.contains("shape")) throw bad("no \"shape\" in its metadata");
    const std::vector<std::uint64_t> dims = uints("shape", kMaxRank);
    if (!j.contains("block")) throw bad("no \"block\" in its metadata (null per tensor)");
    if (!j["block"].is_null()) {
      const std::vector<std::uint64_t> block = uints("block", BlockSize::kMaxDims);
      BlockSize bs;
      for (std::uint64_t e : block) {
        if (e == 0 || e > 0xffffffffu) throw bad(fmt::format("block extent {}; expected 1 to 2^32 - 1", e));
        bs.dims[bs.rank++] = static_cast<std::uint32_t>(e);
      }
      s.level = QuantLevel::block(bs);
    }
    const std::size_t ci = find(file.tensors, name), si = find(file.tensors, scales_name);
    if (ci == static_cast<std::size_t>(-1)) throw bad("its codes are not in the file");
    if (si == static_cast<std::size_t>(-1) || si == ci) throw bad("its scales '" + scales_name + "' are not in the file");
    if (used[ci] || used[si]) throw bad("its codes or scales belong to another quantized tensor too");
    used[ci] = used[si] = true;
    const Shape shape(std::vector<std::size_t>(dims.begin(), dims.end()));
    Shape grid;
    try {
      grid = q::grid_shape(op, shape, s);
    } catch (const Error& e) {
      throw bad(fmt::format("its block does not fit its shape: {}", e.what()));
    }
    const TensorData& codes = file.tensors[ci].second;
    const TensorData& scales = file.tensors[si].second;
    const Shape want_codes = code_shape(s, shape);
    if (codes.dtype() != code_dtype(s) || codes.shape() != want_codes)
      throw bad(fmt::format("codes of the wrong dtype or shape; expected {} {}; got {} {}", dtype_name(code_dtype(s)),
                            want_codes.to_string(), dtype_name(codes.dtype()), codes.shape().to_string()));
    const DType want_scales = kParamDtypes[pi];
    if (scales.dtype() != want_scales || scales.shape() != grid)
      throw bad(fmt::format("scales of the wrong dtype or shape; expected {} {}; got {} {}", dtype_name(want_scales),
                            grid.to_string(), dtype_name(scales.dtype()), scales.shape().to_string()));
    std::vector<std::byte> bytes;
    bytes.reserve(codes.bytes().size() + scales.bytes().size());
    bytes.insert(bytes.end(), codes.bytes().begin(), codes.bytes().end());
    bytes.insert(bytes.end(), scales.bytes().begin(), scales.bytes().end());
    try {
      file.tensors[ci].second = TensorData::quantized(std::move(bytes), shape, s);
    } catch (const Error& e) {
      throw bad(e.what());
    }
    drop[si] = true;
    file.metadata.erase(key);
  }
  NamedTensors kept;
  kept.reserve(file.tensors.size());
  for (std::size_t i = 0; i < file.tensors.size(); ++i)
    if (!drop[i]) kept.push_back(std::move(file.tensors[i]));
  file.tensors = std::move(kept);
}

}  // namespace tensor::io::detail
