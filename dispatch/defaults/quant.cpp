// Defaults: the op table's quant section, composed from the backend's float and int entries
// (issue 32 step 1's composition, now the default every backend without a kernel gets: mini,
// vulkan). quantize reads the scales back (one f32 per block) to take their reciprocals on
// the host: q = clamp(round(x * (1 / scale)), a, b), ties away from zero, as burn's CPU
// reference (Flex) computes it; a product is rounded the same on every device, a division
// need not be (Vulkan allows 2.5 ulp), so the codes agree across devices. The CPU's one-pass
// kernels (backends/cpu/quant.cpp) give the same values bit for bit.
#include "dispatch/defaults/compose.hpp"
#include "dispatch/quant.hpp"
#include "dispatch/quant_model.hpp"

namespace tensor::dispatch::defaults {
namespace {

Shape shape_of(const std::vector<std::int64_t>& dims) {
  Shape s;
  for (std::int64_t d : dims) s.push_back(static_cast<std::size_t>(d));
  return s;
}

Prim cast_to(OpCode op, Prim x, DType dt) {
  const DeviceId d = x->device();
  return call<Family::Cast>(op, d, std::move(x), dt);
}

Prim share(const DispatchTensor& t) { return DispatchTensor(t).take(); }

Prim d_quantize(Prim x, Prim scales, const QuantScheme& scheme) {
  const DeviceId dev = x->device();
  const Shape shape = x->shape();
  const quant::Extents e = quant::block_extents("quantize", shape, scheme);
  const quant::Split s = quant::split(shape, e, !scheme.level.is_block());
  const auto [a, b] = scheme.range();
  const std::vector<float> sc = read_prim(scales).to_vec<float>();
  std::vector<float> inv(sc.size());
  for (std::size_t i = 0; i < inv.size(); ++i) inv[i] = 1.0f / sc[i];
  Prim r = reshape_to(upload(TensorData::from<float>(inv, Shape{inv.size()}), dev), shape_of(s.grid));
  Prim xf = x->dtype() == DType::F32 ? std::move(x) : cast_to(OpCode::cast, std::move(x), DType::F32);
  Prim v = bin(OpCode::mul, reshape_to(std::move(xf), shape_of(s.view)), std::move(r));
  // round half away from zero: trunc(v) + sign(v) * (|v - trunc(v)| >= 0.5), exact in f32
  Prim t = un(OpCode::trunc, v);
  Prim half = cmp_s(OpCode::greater_equal_elem, un(OpCode::abs, bin(OpCode::sub, v, t)), Scalar(0.5));
  Prim step = bin(OpCode::mul, un(OpCode::sign, std::move(v)), cast_to(OpCode::into_float, std::move(half), DType::F32));
  Prim q = call<Family::Clamp>(OpCode::clamp, dev, bin(OpCode::add, std::move(t), std::move(step)), Scalar(a), Scalar(b));
  Prim codes = cast_to(OpCode::into_int, reshape_to(std::move(q), shape), DType::I8);
  return Prim(Ref<quant::QuantPrim>::make(shape, dev, scheme, DispatchTensor(std::move(codes), Kind::Int),
                                          DispatchTensor(std::move(scales), Kind::Float)));
}

Prim d_dequantize(Prim pq, DType dtype) {
  const auto& q = prim_as<quant::QuantPrim>(pq);
  const Shape shape = q.shape();
  const QuantScheme& scheme = q.scheme();
  const quant::Extents e = quant::block_extents("dequantize", shape, scheme);
  const quant::Split s = quant::split(shape, e, !scheme.level.is_block());
  Prim v = reshape_to(cast_to(OpCode::into_float, share(q.codes()), DType::F32), shape_of(s.view));
  Prim sc = reshape_to(share(q.scales()), shape_of(s.grid));
  Prim r = reshape_to(bin(OpCode::mul, std::move(v), std::move(sc)), shape);
  return dtype == DType::F32 ? r : cast_to(OpCode::cast, std::move(r), dtype);
}

// The weight dequantized to x's dtype, then the backend's float product (burn's q_matmul
// under Inhibit: the float weight is materialized).
Prim d_q_matmul(Prim x, Prim w) {
  const DeviceId dev = x->device();
  const std::size_t r = x->shape().rank();
  Prim wf = call<Family::Dequantize>(OpCode::dequantize, dev, std::move(w), x->dtype());
  if (r > 2) {
    Shape s;
    for (std::size_t i = 0; i + 2 < r; ++i) s.push_back(1);
    s.push_back(wf->shape()[0]);
    s.push_back(wf->shape()[1]);
    wf = reshape_to(std::move(wf), s);
  }
  return call<Family::Matmul>(OpCode::matmul, dev, std::move(x), std::move(wf));
}

// conv2d's default: the weight dequantized to x's dtype, then the backend's float conv2d.
Prim d_q_conv2d(Prim x, Prim w, Prim bias, const QConvArgs& a) {
  const DeviceId dev = x->device();
  Prim wf = call<Family::Dequantize>(OpCode::dequantize, dev, std::move(w), x->dtype());
  return call<Family::Conv>(OpCode::conv2d, dev, std::move(x), std::move(wf), std::move(bias), a.conv);
}

}  // namespace

TENSOR_DEFAULT(OpCode, quantize, d_quantize)
TENSOR_DEFAULT(OpCode, q_matmul, d_q_matmul)
TENSOR_DEFAULT(OpCode, dequantize, d_dequantize)
TENSOR_DEFAULT(OpCode, q_conv2d, d_q_conv2d)

}  // namespace tensor::dispatch::defaults
