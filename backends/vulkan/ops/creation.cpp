// Creation and transfer: host data in and out, empty, fill (full/zeros/ones), moves
// between devices, and the host-side random generator (xoshiro256** per device).
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <future>
#include <map>
#include <mutex>

#include "backends/vulkan/ops/kernel.hpp"
#include "backends/vulkan/vk_ops.hpp"
#include "tensor/error.hpp"

namespace tensor::vulkan {

using namespace kernel;

namespace {

Prim empty_entry(const Shape& shape, DeviceId dev, DType dt) {
  VkRef t = alloc(dev, dt, shape);
  if (is_bool(dt)) {  // reading an "uninitialised" bool tensor stays defined
    std::vector<std::byte> zeros(shape.num_elements() * dtype_size(dt));
    t->ctx().upload(t->buffer(), zeros.data(), zeros.size());
  }
  return t;
}

}  // namespace

Prim kernel::upload_data(TensorData data, DeviceId dev) {
  Context& c = ctx_of(dev);
  check_storage_dtype(c, data.dtype(), "from_data");
  VkRef t = alloc(dev, data.dtype(), data.shape());
  if (is_bool(data.dtype()) && dtype_size(data.dtype()) == 1) {
    for (std::byte& b : data.bytes()) b = b != std::byte{0} ? std::byte{1} : std::byte{0};  // kernels read 0/1
  }
  c.upload(t->buffer(), data.bytes().data(), data.bytes().size());
  return t;
}

std::future<TensorData> kernel::read_data(Prim p) {
  VkRef t = to_contiguous(as_vk(std::move(p)));
  Context* c = &t->ctx();
  const std::size_t bytes = t->shape().num_elements() * dtype_size(t->dtype());
  std::size_t off = static_cast<std::size_t>(t->offset()) * dtype_size(t->dtype());
  BufRef host = c->prepare_readback(t->buffer(), off, bytes);
  const std::uint64_t ticket = c->flush();
  return std::async(std::launch::deferred, [c, ticket, host, src = t->buffer(), off, bytes, shape = t->shape(), dt = t->dtype()] {
    c->wait_read(ticket, src.get());
    std::vector<std::byte> out;
    try {
      out.resize(bytes);
    } catch (const std::bad_alloc&) {
      throw ExecutionError(fmt::format("[into_data] out of host memory; expected {} bytes on the host for a tensor of "
                                       "vulkan:{}; got an allocation failure",
                                       bytes, c->id().index_id));
    }
    if (bytes) std::memcpy(out.data(), host->mapped() + off, bytes);
    return TensorData(std::move(out), shape, dt);
  });
}

namespace {

Prim to_device_entry(Prim p, DeviceId dev) {
  VkRef t = as_vk(std::move(p));
  TensorData d = read_data(std::move(t)).get();
  return upload_data(std::move(d), dev);
}

// Host-generated random values (xoshiro256** per device), uploaded.
struct Rng {
  std::uint64_t s[4] = {0x9e3779b97f4a7c15ull, 0xbf58476d1ce4e5b9ull, 0x94d049bb133111ebull, 0x2545f4914f6cdd1dull};
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  void seed(std::uint64_t v) {
    for (auto& w : s) {
      std::uint64_t z = (v += 0x9e3779b97f4a7c15ull);
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      w = z ^ (z >> 31);
    }
  }
  std::uint64_t next() {
    const std::uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]; s[2] ^= t; s[3] = rotl(s[3], 45);
    return r;
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
};
std::mutex g_rng_mu;
std::map<std::uint16_t, Rng> g_rngs;

Prim random_entry(const Shape& shape, const Distribution& dist, DeviceId dev, DType dt) {
  const std::size_t n = shape.num_elements();
  std::vector<double> v(n);
  {
    std::lock_guard<std::mutex> lock(g_rng_mu);
    Rng& r = g_rngs[dev.index_id];
    for (std::size_t i = 0; i < n; ++i) {
      switch (dist.kind) {
        case Distribution::Kind::Default: v[i] = r.uniform(); break;
        case Distribution::Kind::Uniform: v[i] = dist.a + (dist.b - dist.a) * r.uniform(); break;
        case Distribution::Kind::Bernoulli: v[i] = r.uniform() < dist.a ? 1.0 : 0.0; break;
        case Distribution::Kind::Normal: {
          const double u1 = 1.0 - r.uniform(), u2 = r.uniform();
          v[i] = dist.a + dist.b * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
          break;
        }
      }
      if (is_int(dt) && dist.kind != Distribution::Kind::Bernoulli) v[i] = std::floor(v[i]);
    }
  }
  return upload_data(TensorData::from(v, shape).convert(dt), dev);
}

Prim full_entry(const Shape& shape, Scalar v, DeviceId dev, DType dt) {
  VkRef out = alloc(dev, dt, shape);
  launch_ew(EW_FILL, dt, dt, dt, false, shape, operand(*out, shape), operand(*out, shape), nullptr, nullptr,
            scalar_raw(dt, v), 0);
  return out;
}
Prim zeros_entry(const Shape& shape, DeviceId dev, DType dt) { return full_entry(shape, Scalar(0), dev, dt); }
Prim ones_entry(const Shape& shape, DeviceId dev, DType dt) { return full_entry(shape, Scalar(1), dev, dt); }

}  // namespace

void seed_device(DeviceId device, std::uint64_t seed) {
  std::lock_guard<std::mutex> lock(g_rng_mu);
  g_rngs[device.index_id].seed(seed);
}

void register_creation(dispatch::Backend& b) {
  using O = OpCode;
  b.set<O::from_data>(&upload_data);
  b.set<O::empty>(&empty_entry);
  b.set<O::random>(&random_entry);
  b.set<O::into_data>(&read_data);
  b.set<O::to_device>(&to_device_entry);
  b.set<O::full>(&full_entry);
  b.set<O::zeros>(&zeros_entry);
  b.set<O::ones>(&ones_entry);
}

}  // namespace tensor::vulkan
