// Quantized tensors in dispatch (issue 32, step 1): the QFloat primitive and the
// quantize / dequantize / calibration paths, composed from float and int ops through the
// one forward path, so every backend (cpu, mini, vulkan) holds quantized tensors with no
// backend code. docs/quantization.md has the model.
//
// A quantized tensor is a DispatchTensor of kind Float whose primitive is a QuantPrim
// (dtype QFloat): the scheme, the codes (an I8 tensor of the logical shape, one code per
// element, whatever the store: PackedU32 is the layout of its TensorData) and the scales
// (an F32 tensor, one per block, row-major over the block grid, already rounded to the
// scheme's scale dtype). Every float op refuses it at its usage check (no device lists
// QFloat as Arithmetic), before any backend sees the primitive.
#pragma once

#include <cstddef>
#include <future>
#include <memory>
#include <mutex>
#include <utility>

#include "dispatch/dispatch.hpp"
#include "tensor/quantization.hpp"

namespace tensor::dispatch::quant {

// A quantized conv2d takes the int8 route (q_conv2d) from this many products per output
// (K = C_in * KH * KW): under it (a first layer on one channel: K = 9) the activation
// quantization, the int8 tile padding and the layout passes cost more than the float conv
// they replace (the cnn's first conv on int8 took eval from ~1.0x to ~0.8x of f32). Read by
// the conv_quantized rule and by the cpu's fused int8 block, which must take the same route.
inline constexpr std::size_t kMinIntConvK = 32;

// What a backend derives from a quantized weight once and keeps with it (the cpu: oneDNN's
// reordered int8 weights and the primitives that read them), dropped with the tensor.
struct QuantCache {
  virtual ~QuantCache() = default;
};

class QuantPrim final : public Primitive {
 public:
  QuantPrim(const Shape& shape, DeviceId device, const QuantScheme& scheme, DispatchTensor codes, DispatchTensor scales)
      : Primitive(DType::QFloat, shape, device), scheme_(scheme), codes_(std::move(codes)), scales_(std::move(scales)) {}
  bool can_mut() const override { return false; }
  const QuantScheme& scheme() const { return scheme_; }
  const DispatchTensor& codes() const { return codes_; }
  const DispatchTensor& scales() const { return scales_; }
  // The backend's cache of this tensor (made by `make` on first use; the tensor is
  // immutable, so the cache never goes stale). Thread-safe.
  template <class C, class Make>
  std::shared_ptr<C> cache(Make&& make) const {
    const std::lock_guard<std::mutex> lock(cache_mu_);
    if (!cache_) cache_ = make();
    return std::static_pointer_cast<C>(cache_);
  }
  // A tensor derived from this one once and kept with it (conv's weight as the [K, C_out]
  // product weight); `make` runs on first use. Thread-safe.
  template <class Make>
  DispatchTensor derived(Make&& make) const {
    const std::lock_guard<std::mutex> lock(cache_mu_);
    if (!derived_.prim) derived_ = make();
    return derived_;
  }

 private:
  mutable std::mutex cache_mu_;
  mutable std::shared_ptr<QuantCache> cache_;
  mutable DispatchTensor derived_;
  QuantScheme scheme_;
  DispatchTensor codes_;
  DispatchTensor scales_;
};

// DeviceError naming `op` where `device` is an autodiff device: it wraps every primitive in a
// tracked one, and a quantized tensor is never tracked (burn); use inner().
void check_plain_device(const char* op, DeviceId device);

// The QuantPrim of a quantized tensor; nullptr for any other.
const QuantPrim* as_quant(const DispatchTensor& t);

DispatchTensor quantize(const DispatchTensor& x, const QuantScheme& scheme, const DispatchTensor& scales);
DispatchTensor quantize_dynamic(const DispatchTensor& x, const QuantScheme& scheme);
// To `dtype` (a float dtype). DTypeError naming dequantize for a tensor that is not quantized.
DispatchTensor dequantize(const DispatchTensor& q, DType dtype);
// Per block (row-major over the block grid): min and max, as F32 [n] tensors.
std::pair<DispatchTensor, DispatchTensor> compute_range(const QuantScheme& scheme, const DispatchTensor& x);
// scale = 2 * max(|min|, |max|) / (b - a), an F32 [n] tensor (not yet rounded to the dtype).
DispatchTensor compute_q_params(const QuantScheme& scheme, const DispatchTensor& min, const DispatchTensor& max);

// The op-table rows (dispatch/rules/quant.cpp), through the one forward path: `scales` is
// an F32 [blocks] tensor already rounded and validated (validated_scale) on x's device;
// the result's primitive is the backend's QuantPrim. dequantize_row: DTypeError for a
// tensor that is not quantized or a dtype that is not a float dtype.
DispatchTensor quantize_row(const DispatchTensor& x, DispatchTensor scales, const QuantScheme& scheme);
DispatchTensor dequantize_row(const DispatchTensor& q, DType dtype);
DispatchTensor quantize_dynamic_row(DispatchTensor x, const QuantScheme& scheme);

// The float ops with a quantized operand (dispatch/rules/quant.cpp), called by the matmul,
// linear and conv forwarders when an operand's dtype is QFloat. A float x times a quantized
// weight [K, N] with scales per tensor or per output column reaches the q_matmul row (oneDNN's
// int8 product on the cpu, vulkan's dequantize-in-shader f32 product, dequantize + matmul on mini); conv2d
// (groups 1, scales per tensor or output channel) is unfold4d + an integer q_matmul (QFloat Accelerated);
// every other case dequantizes the quantized operands, then runs the float op.
inline bool is_quantized(const DispatchTensor& t) { return t.prim && t.dtype() == DType::QFloat; }
DispatchTensor matmul_quantized(DispatchTensor a, DispatchTensor b);
DispatchTensor linear_quantized(DispatchTensor x, DispatchTensor weight, DispatchTensor bias);
DispatchTensor conv_quantized(OpCode op, DispatchTensor x, DispatchTensor weight, DispatchTensor bias, const ConvArgs& args);


}  // namespace tensor::dispatch::quant
