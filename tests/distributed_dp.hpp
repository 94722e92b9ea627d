// Data-parallel equivalence (distributed_test over a LocalGroup, distributed_mpi_test under
// mpirun): a small MLP trained with Adam on a fixed stream of batches. train_mlp(rank, world)
// trains on rows [rank * B / world, (rank + 1) * B / world) of every global batch of B rows,
// with dist::GradientSync (Mean) when world > 1; train_mlp(0, 1) is the one process with the
// whole batch. The loss is the mean over the local rows, so the mean of the ranks' gradients
// is the whole batch's gradient: the two runs differ only in float summation order.
#pragma once

#include <cmath>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <tensor/distributed.hpp>
#include <tensor/modules/core.hpp>
#include <tensor/modules/optim.hpp>

namespace dist_dp {

using namespace tensor;

constexpr std::size_t kIn = 6, kHidden = 8, kOut = 3, kBatch = 8;

struct Mlp : Module {
  nn::Linear fc1, fc2;
  explicit Mlp(const Device& d)
      : fc1(nn::LinearConfig{kIn, kHidden, true, Initializer::zeros()}, d),
        fc2(nn::LinearConfig{kHidden, kOut, true, Initializer::zeros()}, d) {}
  void visit(ModuleVisitor& v) override {
    v.module("fc1", fc1);
    v.module("fc2", fc2);
  }
  Tensor<2> forward(const Tensor<2>& x) const { return fc2.forward(fc1.forward(x).tanh()); }
};

// Values from a formula (no random stream: LocalGroup ranks share the device's), shifted by
// `shift` (ranks other than 0 start elsewhere: GradientSync must broadcast rank 0's).
inline TensorData formula(std::size_t rows, std::size_t cols, double a, double b, double shift) {
  std::vector<float> v(rows * cols);
  for (std::size_t i = 0; i < rows; ++i)
    for (std::size_t j = 0; j < cols; ++j)
      v[i * cols + j] = static_cast<float>(0.5 * std::sin(a * static_cast<double>(i + 1) + b * static_cast<double>(j)) + shift);
  return TensorData::from(v, Shape{rows, cols});
}

struct Trained {
  std::vector<std::string> names;
  std::vector<std::vector<float>> values;
};

// `steps` steps of Adam (lr 0.05) or, with sgd, plain SGD (lr 0.2: unlike Adam's, its step
// scales with the gradient, so a sum where a mean belongs shows); the parameters after them,
// in visit order.
inline Trained train_mlp(const Device& device, int rank, int world, int steps, dist::GradientSyncOptions sync_options = {},
                         bool sgd = false) {
  const Device ad = device.autodiff();
  Mlp m(ad);
  const double shift = rank == 0 ? 0.0 : 0.25 * rank;
  m.fc1.weight = Tensor<2>::from_data(formula(kIn, kHidden, 0.7, 0.3, shift), ad).require_grad();
  m.fc2.weight = Tensor<2>::from_data(formula(kHidden, kOut, 0.4, 0.9, shift), ad).require_grad();
  std::optional<dist::GradientSync> sync;
  if (world > 1) sync.emplace(m, sync_options);
  auto opt = sgd ? optim::ModuleOptimizer::sgd() : optim::ModuleOptimizer::adam();
  const std::size_t local = kBatch / static_cast<std::size_t>(world), first = local * static_cast<std::size_t>(rank);
  for (int s = 0; s < steps; ++s) {
    const TensorData xs = formula(kBatch, kIn, 0.37 + 0.05 * s, 0.11, 0.0);
    const TensorData ys = formula(kBatch, kOut, 0.23 + 0.07 * s, 0.5, 0.0);
    const auto rows = [&](const TensorData& d, std::size_t cols) {
      const std::vector<float> all = d.to_vec<float>();
      std::vector<float> mine(all.begin() + static_cast<std::ptrdiff_t>(first * cols),
                              all.begin() + static_cast<std::ptrdiff_t>((first + local) * cols));
      return Tensor<2>::from_data(TensorData::from(mine, Shape{local, cols}), ad);
    };
    const Tensor<2> diff = m.forward(rows(xs, kIn)) - rows(ys, kOut);
    const Tensor<1> loss = (diff * diff).mean();
    Gradients grads = loss.backward();
    if (sync) sync->sync(grads);
    opt.step(sgd ? 0.2 : 0.05, m, grads);
  }
  Trained out;
  for (const ParamRef& p : m.named_parameters()) {
    out.names.push_back(p.name);
    out.values.push_back(p.slot.rank == 2 ? p.get<2>().to_vec<float>() : p.get<1>().to_vec<float>());
  }
  return out;
}

}  // namespace dist_dp
