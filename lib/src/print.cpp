// Tensor::to_string / operator<<: burn's Display layout (values, then shape, device,
// kind and dtype), with burn's print options (precision, threshold, edge items).
#include <charconv>
#include <cmath>
#include <mutex>
#include <ostream>
#include <string>
#include <vector>

#include "tensor/detail.hpp"
#include "tensor/error.hpp"
#include "tensor/quantization.hpp"

namespace tensor::detail {
namespace {

std::mutex g_mu;
PrintOptions g_options;

// Rust's Display of a float: the shortest digits that read back exactly, in fixed
// notation with at least one decimal ("1.0"), "NaN", "inf", "-inf"; or `precision` decimals.
template <class T>
std::string float_text(T v, const std::optional<std::size_t>& precision) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[512];
  std::to_chars_result r{};
  if (precision) r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, static_cast<int>(*precision));
  else r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
  if (r.ec != std::errc()) return std::to_string(v);
  std::string s(buf, r.ptr);
  if (!precision && s.find('.') == std::string::npos) s += ".0";
  return s;
}

struct Printer {
  const Shape& shape;
  const PrintOptions& o;
  std::vector<std::string> text;  // one entry per element, row-major
  bool summarize;
  std::string out;

  void dim(std::size_t level, std::size_t offset) {
    std::size_t stride = 1;
    for (std::size_t i = level + 1; i < shape.rank(); ++i) stride *= shape[i];
    const std::size_t n = shape[level];
    const bool cut = summarize && n > 2 * o.edge_items;
    out += '[';
    const bool inner = level + 1 == shape.rank();
    const std::string sep = inner ? ", " : ",\n" + std::string(level + 1, ' ');
    for (std::size_t i = 0; i < n; ++i) {
      if (cut && i == o.edge_items) {
        out += "...";
        // burn: an elided run of rows is "...", a newline and the indent (no comma).
        out += inner ? sep : "\n" + std::string(level + 1, ' ');
        i = n - o.edge_items;
      }
      if (inner) out += text[offset + i];
      else dim(level + 1, offset + i * stride);
      if (i + 1 < n) out += sep;
    }
    out += ']';
  }
};

std::string kind_text(Kind k) {
  switch (k) {
    case Kind::Float: return "Float";
    case Kind::Int: return "Int";
    case Kind::Bool: return "Bool";
    case Kind::QFloat: return "QFloat";
  }
  return "?";
}

}  // namespace

PrintOptions print_options() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_options;
}

void set_print_options(const PrintOptions& options) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_options = options;
}

std::string format(const Handle& h, const PrintOptions& o) {
  if (h.empty()) throw Error("[to_string] expected a tensor; got an empty (moved-from) handle");
  const Shape shape = detail::shape(h);
  const DType dt = dtype(h);
  const Device dev = device(h);
  // A quantized tensor prints its dequantized values and its scheme as the dtype.
  const std::optional<QuantScheme> scheme = quant_scheme(h);
  const TensorData data = into_data(scheme ? dequantize(h) : retain(h)).get();
  const std::size_t count = data.num_elements();
  Printer p{shape, o, {}, count > o.threshold, {}};
  p.text.reserve(count);
  if (is_float(data.dtype())) {
    if (data.dtype() == DType::F64) {
      for (double v : data.to_vec<double>()) p.text.push_back(float_text(v, o.precision));
    } else {
      for (float v : data.convert(DType::F32).to_vec<float>()) p.text.push_back(float_text(v, o.precision));
    }
  } else if (is_unsigned_int(dt)) {
    for (std::uint64_t v : data.convert(DType::U64).to_vec<std::uint64_t>()) p.text.push_back(std::to_string(v));
  } else if (is_int(dt)) {
    for (std::int64_t v : data.convert(DType::I64).to_vec<std::int64_t>()) p.text.push_back(std::to_string(v));
  } else {
    for (bool v : data.to_vec<bool>()) p.text.push_back(v ? "true" : "false");
  }
  p.dim(0, 0);
  std::string s = "Tensor {\n  data:\n" + p.out + ",\n";
  s += "  shape:  " + shape.to_string() + ",\n";
  s += "  device:  " + dev.to_string() + ",\n";
  s += "  kind:  \"" + kind_text(scheme ? Kind::QFloat : kind(h)) + "\",\n";
  s += "  dtype:  \"" + (scheme ? "qfloat(" + to_string(*scheme) + ")" : std::string(dtype_name(dt))) + "\",\n}";
  return s;
}

std::ostream& print(std::ostream& os, const Handle& h) { return os << format(h, print_options()); }

}  // namespace tensor::detail
