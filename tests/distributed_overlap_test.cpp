// GradientSync's overlap (issue 27): buckets all-reduced on a communication thread while
// backward runs, over the in-process group (LocalGroup, 2 ranks as threads) on the CPU. An op
// hook (dispatch/hooks.hpp, hence the internal dependency) sees where and in which order the
// bucket all_reduces run, injects random sleeps into every op of every thread, and makes a
// rank's backward throw half-way.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <tensor/distributed.hpp>
#include <tensor/profile.hpp>

#include "dispatch/hooks.hpp"
#include "dispatch/profiler.hpp"
#include "distributed_dp.hpp"

namespace {

using namespace tensor;
namespace d = tensor::dispatch;

const Device kCpu = Device::cpu();
// Three buckets for the MLP: {fc2.bias} (3 floats), {fc2.weight, fc1.bias} (24 + 8), {fc1.weight} (48).
const dist::GradientSyncOptions kSmall{dist::ReduceOp::Mean, 128, 64, true};
dist::GradientSyncOptions with_overlap(int on) {
  dist::GradientSyncOptions o = kSmall;
  o.overlap = on;
  return o;
}

// Installs a global op hook for its lifetime.
struct ScopedHook {
  explicit ScopedHook(d::OpHook* h) : h_(h) { d::add_global_hook(h_); }
  ~ScopedHook() { d::remove_global_hook(h_); }
  d::OpHook* h_;
};

// Every all_reduce: its element count, the rank and whether the rank's own thread ran it.
struct AllReduceLog final : d::OpHook {
  std::mutex m;
  std::vector<std::vector<std::size_t>> sizes{2};
  std::vector<std::thread::id> rank_thread{2};
  int on_rank_thread = 0, elsewhere = 0;
  void around(d::OpCall& c, const d::OpNext& next) override {
    if (c.op == OpCode::all_reduce) {
      const int r = dist::rank();
      std::lock_guard<std::mutex> l(m);
      sizes[static_cast<std::size_t>(r)].push_back(c.inputs[0]->shape().num_elements());
      (std::this_thread::get_id() == rank_thread[static_cast<std::size_t>(r)] ? on_rank_thread : elsewhere) += 1;
    }
    next(c);
  }
};

bool same(const dist_dp::Trained& a, const dist_dp::Trained& b) { return a.names == b.names && a.values == b.values; }

TEST(DistOverlap, OnAndOffTrainTheSameModelAsOneProcess) {
  const dist_dp::Trained one = dist_dp::train_mlp(kCpu, 0, 1, 5);
  std::vector<dist_dp::Trained> on(2), off(2);
  AllReduceLog log;
  {
    ScopedHook h(&log);
    dist::LocalGroup(2).run([&](int r) {
      {
        std::lock_guard<std::mutex> l(log.m);
        log.rank_thread[static_cast<std::size_t>(r)] = std::this_thread::get_id();
      }
      on[static_cast<std::size_t>(r)] = dist_dp::train_mlp(kCpu, r, 2, 5, with_overlap(1));
    });
  }
  // Overlap: every bucket's all_reduce ran on a communication thread, in plan order each step.
  EXPECT_EQ(log.on_rank_thread, 0);
  EXPECT_EQ(log.elsewhere, 2 * 5 * 3);
  const std::vector<std::size_t> plan = {3, 32, 48, 3, 32, 48, 3, 32, 48, 3, 32, 48, 3, 32, 48};
  EXPECT_EQ(log.sizes[0], plan);
  EXPECT_EQ(log.sizes[1], plan);
  dist::LocalGroup(2).run([&](int r) { off[static_cast<std::size_t>(r)] = dist_dp::train_mlp(kCpu, r, 2, 5, with_overlap(0)); });
  // The same calls on the same bytes: bitwise equal across ranks and across the two modes.
  EXPECT_TRUE(same(on[0], on[1]));
  EXPECT_TRUE(same(on[0], off[0]));
  EXPECT_TRUE(same(off[0], off[1]));
  ASSERT_EQ(on[0].names, one.names);
  for (std::size_t p = 0; p < one.values.size(); ++p)
    for (std::size_t i = 0; i < one.values[p].size(); ++i)
      EXPECT_NEAR(on[0].values[p][i], one.values[p][i], 1e-6 + 1e-5 * std::fabs(one.values[p][i])) << one.names[p] << "[" << i << "]";
}

// Whether each rank's GradientSync (constructed with `o`) overlaps.
std::vector<int> overlap_of(const dist::GradientSyncOptions& o) {
  std::vector<int> got(2, -1);
  dist::LocalGroup(2).run([&](int r) {
    dist_dp::Mlp m(kCpu.autodiff());
    const dist::GradientSync sync(m, o);
    got[static_cast<std::size_t>(r)] = sync.overlap() ? 1 : 0;
    for (const ParamRef& p : m.named_parameters())  // marked when it overlaps
      EXPECT_EQ(p.slot.rank == 2 ? dist::is_distributed(p.get<2>()) : dist::is_distributed(p.get<1>()), sync.overlap()) << p.name;
  });
  return got;
}

TEST(DistOverlap, TheSettingAndTheMarks) {
  EXPECT_EQ(overlap_of(with_overlap(1)), (std::vector<int>{1, 1}));
  EXPECT_EQ(overlap_of(with_overlap(0)), (std::vector<int>{0, 0}));
  ::setenv("TENSOR_DIST_OVERLAP", "0", 1);
  EXPECT_EQ(overlap_of(kSmall), (std::vector<int>{0, 0}));
  ::setenv("TENSOR_DIST_OVERLAP", "yes", 1);
  EXPECT_THROW(overlap_of(kSmall), Error);
  ::unsetenv("TENSOR_DIST_OVERLAP");
  EXPECT_EQ(overlap_of(kSmall), (std::vector<int>{1, 1}));
  EXPECT_THROW(overlap_of(with_overlap(2)), Error);
  // The singleton world has nothing to reduce: no thread.
  dist_dp::Mlp m(kCpu.autodiff());
  EXPECT_FALSE(dist::GradientSync(m, with_overlap(1)).overlap());
  // The mark: on a leaf only, kept by the optimizer's update.
  const Tensor<1> leaf = Tensor<1>::from_data(TensorData::from(std::vector<float>{1, 2}), kCpu.autodiff()).require_grad();
  EXPECT_FALSE(dist::is_distributed(leaf));
  dist::set_distributed(leaf, 77);
  EXPECT_EQ(dist::distributed_id(leaf), 77u);
  // The Tensor members the issue names are the same mark.
  EXPECT_TRUE(leaf.is_distributed());
  EXPECT_EQ(&leaf.set_distributed(0), &leaf);
  EXPECT_FALSE(leaf.is_distributed());
  EXPECT_FALSE(dist::is_distributed(leaf));
  leaf.set_distributed(78);
  EXPECT_EQ(dist::distributed_id(leaf), 78u);
  EXPECT_THROW(leaf.square().set_distributed(1), Error);
  EXPECT_FALSE(leaf.square().is_distributed());
  dist::set_distributed(leaf, 77);
  EXPECT_EQ(dist::distributed_id(leaf), 77u);
  EXPECT_THROW(dist::set_distributed(leaf.square(), 1), Error);
  EXPECT_THROW(dist::set_distributed(Tensor<1>::zeros(Shape{2}, kCpu.autodiff()), 1), Error);
  dist_dp::Mlp mm(kCpu.autodiff());
  mm.fc1.weight = mm.fc1.weight.require_grad();
  dist::set_distributed(mm.fc1.weight, 5);
  const Tensor<1> loss = mm.forward(Tensor<2>::ones(Shape{1, dist_dp::kIn}, kCpu.autodiff())).sum();
  Gradients g = loss.backward();
  optim::ModuleOptimizer::sgd().step(0.1, mm, g);
  EXPECT_EQ(dist::distributed_id(mm.fc1.weight), 5u);
}

// The profile's rows: per rank and step one dist.wait (sync's wait) and one dist.step from the
// second sync on, three dist.bucket (the communication thread's all_reduce), with or without
// overlap (then dist.wait is the whole reduction and no dist.bucket), and the printed share.
TEST(DistOverlap, ProfileRowsTimeTheWaitForGradients) {
  for (const int overlap : {1, 0}) {
    profile::start();
    dist::LocalGroup(2).run([&](int r) { (void)dist_dp::train_mlp(kCpu, r, 2, 4, with_overlap(overlap)); });
    const ProfileResult p = profile::stop();
    std::uint64_t wait = 0, step = 0, bucket = 0;
    double wait_ms = 0, step_ms = 0;
    for (const ProfileRow& row : p.rows) {
      if (row.device != "cpu") continue;
      if (row.op == "dist.wait") wait = row.calls, wait_ms = row.total_ms;
      if (row.op == "dist.step") step = row.calls, step_ms = row.total_ms;
      if (row.op == "dist.bucket") bucket = row.calls;
    }
    EXPECT_EQ(wait, 2u * 4u) << "overlap " << overlap;
    EXPECT_EQ(step, 2u * 3u) << "overlap " << overlap;
    EXPECT_EQ(bucket, overlap ? 2u * 4u * 3u : 0u) << "overlap " << overlap;
    EXPECT_GT(step_ms, 0.0);
    EXPECT_GE(wait_ms, 0.0);
    EXPECT_NE(d::format_profile(p).find("waiting for gradients: "), std::string::npos) << d::format_profile(p);
  }
}

// Random sleeps (0-1.5 ms) before every op on every thread, backward's and the communication
// thread's: 10 runs give bitwise-identical parameters, and each rank's all_reduces follow the
// plan's order every step.
struct Jitter final : d::OpHook {
  std::atomic<unsigned> seed{1};
  void around(d::OpCall& c, const d::OpNext& next) override {
    thread_local std::mt19937 rng(seed.fetch_add(7919));
    std::this_thread::sleep_for(std::chrono::microseconds(std::uniform_int_distribution<int>(0, 1500)(rng)));
    next(c);
  }
};

TEST(DistOverlap, BucketOrderDoesNotDependOnThreadTiming) {
  std::vector<dist_dp::Trained> first(2);
  dist::LocalGroup(2).run([&](int r) { first[static_cast<std::size_t>(r)] = dist_dp::train_mlp(kCpu, r, 2, 2, with_overlap(1)); });
  for (unsigned run = 0; run < 10; ++run) {
    Jitter jitter;
    jitter.seed = 100 * run + 1;
    AllReduceLog log;
    std::vector<dist_dp::Trained> got(2);
    {
      ScopedHook h1(&log), h2(&jitter);
      dist::LocalGroup(2).run([&](int r) { got[static_cast<std::size_t>(r)] = dist_dp::train_mlp(kCpu, r, 2, 2, with_overlap(1)); });
    }
    EXPECT_TRUE(same(got[0], first[0])) << "run " << run;
    EXPECT_TRUE(same(got[1], first[1])) << "run " << run;
    const std::vector<std::size_t> plan = {3, 32, 48, 3, 32, 48};
    EXPECT_EQ(log.sizes[0], plan) << "run " << run;
    EXPECT_EQ(log.sizes[1], plan) << "run " << run;
  }
}

// A module with a parameter that only rank 0's loss uses: rank 1's backward never reaches
// it, so its bucket counts it as zeros from the start and the reduced gradient is rank 0's
// half; a parameter no rank uses gets zeros.
struct TwoVectors : Module {
  Tensor<1> a, b, unused;
  explicit TwoVectors(const Device& d)
      : a(Tensor<1>::from_data(TensorData::from(std::vector<float>{1, 2, 3}), d).require_grad()),
        b(Tensor<1>::from_data(TensorData::from(std::vector<float>{0.5f, -1}), d).require_grad()),
        unused(Tensor<1>::zeros(Shape{4}, d).require_grad()) {}
  void visit(ModuleVisitor& v) override {
    v.param("a", a);
    v.param("b", b);
    v.param("unused", unused);
  }
};

TEST(DistOverlap, ParametersARankOrEveryRankLeavesUnused) {
  for (const int overlap : {1, 0}) {
    std::vector<std::vector<float>> ga(2), gb(2), gu(2);
    dist::LocalGroup(2).run([&](int r) {
      TwoVectors m(kCpu.autodiff());
      // One parameter per bucket: b's bucket waits for a's in the plan (reverse visit order: unused, b, a).
      dist::GradientSync sync(m, {dist::ReduceOp::Mean, 8, 8, true, overlap});
      const float k = static_cast<float>(r + 1);
      // L_r = k * sum(a) + (r == 0 ? sum(b * b) : 0): dL/da = k, dL/db = 2b on rank 0 only.
      Tensor<1> loss = m.a.sum() * static_cast<double>(k);
      if (r == 0) loss = loss + (m.b * m.b).sum();
      Gradients g = loss.backward();
      sync.sync(g);
      const auto i = static_cast<std::size_t>(r);
      ga[i] = m.a.grad(g)->to_vec<float>();
      gb[i] = m.b.grad(g)->to_vec<float>();
      gu[i] = m.unused.grad(g)->to_vec<float>();
    });
    for (std::size_t r = 0; r < 2; ++r) {
      EXPECT_EQ(ga[r], (std::vector<float>{1.5f, 1.5f, 1.5f})) << "overlap " << overlap << " rank " << r;  // (1 + 2) / 2
      EXPECT_EQ(gb[r], (std::vector<float>{0.5f, -1.0f})) << "overlap " << overlap << " rank " << r;      // (2b + 0) / 2
      EXPECT_EQ(gu[r], (std::vector<float>(4, 0.0f))) << "overlap " << overlap << " rank " << r;
    }
  }
}

// A parameter replaced by other means than ModuleOptimizer::step has lost its mark, so
// backward does not report it: sync() notices on every rank, reduces by itself (the right
// gradient, not the zeros the thread reduced) and marks it again for the next pass.
TEST(DistOverlap, AParameterReplacedWithoutItsMarkIsStillReduced) {
  std::vector<std::vector<float>> first(2), second(2);
  std::vector<int> remarked(2, 0);
  dist::LocalGroup(2).run([&](int r) {
    TwoVectors m(kCpu.autodiff());
    dist::GradientSync made(m, {dist::ReduceOp::Mean, 8, 8, true, 1});
    dist::GradientSync sync = std::move(made);  // movable: the thread goes with it
    const auto i = static_cast<std::size_t>(r);
    for (int step = 0; step < 2; ++step) {
      if (step == 0) m.a = Tensor<1>::from_data(TensorData::from(std::vector<float>{4, 5, 6}), kCpu.autodiff()).require_grad();
      // b (still marked) is reached too, so the pass is reported and a's zeros reduced.
      const Tensor<1> loss = m.a.sum() * static_cast<double>(r + 1) + m.b.sum();
      Gradients g = loss.backward();
      sync.sync(g);
      (step == 0 ? first : second)[i] = m.a.grad(g)->to_vec<float>();
      if (step == 0) remarked[i] = dist::is_distributed(m.a) ? 1 : 0;
    }
  });
  for (std::size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(first[r], (std::vector<float>{1.5f, 1.5f, 1.5f})) << "rank " << r;  // (1 + 2) / 2
    EXPECT_EQ(second[r], (std::vector<float>{1.5f, 1.5f, 1.5f})) << "rank " << r;
    EXPECT_EQ(remarked[r], 1) << "rank " << r;
  }
}

// Rank 1's backward throws after a few of its ops: it launches no further bucket, so rank 0's
// pending all_reduce fails (the group ends when rank 1's function has thrown) instead of
// waiting; run() rethrows rank 1's exception.
struct ThrowInBackward final : d::OpHook {
  std::atomic<std::thread::id> victim{};
  std::atomic<int> left{4};
  void around(d::OpCall& c, const d::OpNext& next) override {
    if (std::this_thread::get_id() == victim.load() && c.op != OpCode::all_reduce && left.fetch_sub(1) == 1)
      throw std::runtime_error("rank 1 fails mid-backward");
    next(c);
  }
};

TEST(DistOverlap, ARankThatThrowsMidBackwardFailsTheOthers) {
  ThrowInBackward thrower;
  ScopedHook h(&thrower);
  std::string rank0;
  try {
    dist::LocalGroup(2).run([&](int r) {
      dist_dp::Mlp m(kCpu.autodiff());
      m.fc1.weight = Tensor<2>::from_data(dist_dp::formula(dist_dp::kIn, dist_dp::kHidden, 0.7, 0.3, 0), kCpu.autodiff()).require_grad();
      m.fc2.weight = Tensor<2>::from_data(dist_dp::formula(dist_dp::kHidden, dist_dp::kOut, 0.4, 0.9, 0), kCpu.autodiff()).require_grad();
      dist::GradientSync sync(m, with_overlap(1));
      const Tensor<2> x = Tensor<2>::from_data(dist_dp::formula(4, dist_dp::kIn, 0.3, 0.2, 0), kCpu.autodiff());
      const Tensor<1> loss = m.forward(x).square().mean();
      if (r == 1) thrower.victim = std::this_thread::get_id();
      try {
        Gradients g = loss.backward();
        sync.sync(g);
      } catch (const ExecutionError& e) {
        if (r == 0) rank0 = e.what();
        throw;
      }
    });
    FAIL() << "run() returned";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 fails mid-backward"), std::string::npos) << e.what();
  }
  EXPECT_NE(rank0.find("[all_reduce]"), std::string::npos) << rank0;
  EXPECT_NE(rank0.find("rank 1 threw"), std::string::npos) << rank0;
}

}  // namespace
