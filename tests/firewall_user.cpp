// A user translation unit for the compile-firewall test: includes only the public
// header and calls a dozen ops. Its object must reference no dispatch/backend symbol.
#include <tensor/tensor.hpp>

using namespace tensor;

float user_code() {
  Device dev = Device::default_device();
  auto a = Tensor<2>::from_data(TensorData::from<float>({1, 2, 3, 4, 5, 6}, {2, 3}), dev);
  auto b = Tensor<2>::ones({3, 2}, dev);
  auto c = (a.matmul(b) + 1.0f).exp();
  Tensor<2, Bool> m = c.greater_elem(10.0f);
  auto s = c.sum_dim(1).mask_fill(m.slice({Slice::all(), Slice::range(0, 1)}), 0.0);
  auto t = a.transpose().slice({{0, 3, 2}});
  auto i = Tensor<1, Int>::arange(0, 6, dev).reshape(std::array<std::int64_t, 2>{2, 3});
  auto f = (i.float_() * a - a.sqrt()).sum();
  auto r = activation::relu(t.log1p()).mean();
  return s.into_data().to_vec<float>()[0] + f.into_data().to_vec<float>()[0] + r.into_data().to_vec<float>()[0] +
         static_cast<float>(i.argmax(1).into_data().to_vec<std::int32_t>()[0]);
}

// The other public headers a training program uses: weights on disk and optimizers.
#include <tensor/io.hpp>
#include <tensor/optim.hpp>

float user_training_step() {
  auto w = Tensor<2>::ones({2, 2});
  optim::Adam opt(optim::AdamConfig{.grad_clipping = optim::GradientClipping::norm(1.0)});
  w = opt.step(1e-3, "w", w, w.mul_scalar(0.5));
  io::save_safetensors("/dev/null", {{"w", w.into_data()}});
  return static_cast<float>(io::load_npy("/dev/null").num_elements());
}

// Collectives (tensor/distributed.hpp): the singleton world and the in-process group.
#include <tensor/distributed.hpp>

float user_collectives() {
  const auto x = Tensor<2>::ones({2, 2});
  float total = 0;
  dist::LocalGroup group(2);
  group.run([&](int rank) {
    const auto y = dist::all_gather(dist::all_reduce(x, dist::ReduceOp::Mean));
    if (rank == 0) total = static_cast<float>(y.sum().into_scalar().to_double());
  });
  return total + static_cast<float>(dist::world_size());
}
