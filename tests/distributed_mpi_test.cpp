// tensor::dist over Open MPI: run by Meson under `mpirun -np 2` (the `mpi` suite), once over
// shared memory (vader) and once over TCP on loopback. Every rank computes all ranks' inputs
// from the rank numbers (distributed_ref.hpp) and checks its result against the reduction
// computed here. Groups, one mpirun invocation each (a watchdog test leaves its group
// unusable): DistMpi (the collectives; also run with TENSOR_DIST_CHECK=1), DistMpiCheck (needs
// TENSOR_DIST_CHECK=1), DistMpiFail, DistMpiFailLarge and DistMpiFailBackward (need a short
// TENSOR_DIST_TIMEOUT_S). DistMpiFailBackward injects its failure with an op hook
// (dispatch/hooks.hpp, hence the internal dependency).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <tensor/distributed.hpp>

#include "dispatch/hooks.hpp"

#include "distributed_dp.hpp"
#include "distributed_ref.hpp"
#include "test_util.hpp"

namespace {

using namespace tensor;
using tt::Host;
using namespace dist_ref;

int env_int(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : -1;
}

// Every test runs on every rank of a world of at least two processes started by mpirun.
void require_world() {
  ASSERT_GE(env_int("OMPI_COMM_WORLD_SIZE"), 2) << "run under mpirun -np 2 (or more)";
  ASSERT_EQ(dist::world_size(), env_int("OMPI_COMM_WORLD_SIZE"));
}

std::vector<Host> all_inputs(DType dt, std::vector<std::size_t> shape) {
  std::vector<Host> ins;
  for (int r = 0; r < dist::world_size(); ++r) ins.push_back(input(r, dt, shape));
  return ins;
}

TEST(DistMpi, TheWorldIsMpirunsProcesses) {
  require_world();
  EXPECT_EQ(dist::rank(), env_int("OMPI_COMM_WORLD_RANK"));
  const std::string line = dist::describe();
  EXPECT_EQ(line.rfind("mpi (Open MPI ", 0), 0u) << line;
  EXPECT_NE(line.find("world " + std::to_string(dist::world_size()) + ", rank " + std::to_string(dist::rank())), std::string::npos) << line;
  EXPECT_NE(line.find("thread level "), std::string::npos) << line;
  dist::barrier();
}

TEST(DistMpi, EveryCollectiveDTypeAndOp) {
  require_world();
  const int n = dist::world_size();
  const int me = dist::rank();
  const auto mine = static_cast<std::size_t>(me);
  for (DType dt : kDTypes) {
    ASSERT_TRUE(dev().supports_dtype(dt)) << tt::name(dt);
    const std::vector<Host> ins = all_inputs(dt, {static_cast<std::size_t>(2 * n), 3});
    const std::string where = std::string(tt::name(dt)) + " on rank " + std::to_string(me);
    for (dist::ReduceOp op : kOps) {
      const Host want = reduce_ref(ins, op);
      const std::string w = where + ", op " + std::to_string(static_cast<int>(op));
      expect_host_eq(tt::decode(apply_host(Coll::all_reduce, ins[mine], op, 0)), want, "all_reduce " + w);
      expect_host_eq(tt::decode(apply_host(Coll::reduce_scatter, ins[mine], op, 0)), rows(want, 2 * mine, 2), "reduce_scatter " + w);
    }
    for (int root = 0; root < n; ++root)  // root 1 (!= 0) included
      expect_host_eq(tt::decode(apply_host(Coll::broadcast, ins[mine], dist::ReduceOp::Sum, root)), ins[static_cast<std::size_t>(root)],
                     "broadcast from " + std::to_string(root) + ", " + where);
    Host cat = ins[0];
    cat.shape[0] *= static_cast<std::size_t>(n);
    for (int r = 1; r < n; ++r) {
      cat.f.insert(cat.f.end(), ins[static_cast<std::size_t>(r)].f.begin(), ins[static_cast<std::size_t>(r)].f.end());
      cat.i.insert(cat.i.end(), ins[static_cast<std::size_t>(r)].i.begin(), ins[static_cast<std::size_t>(r)].i.end());
    }
    expect_host_eq(tt::decode(apply_host(Coll::all_gather, ins[mine], dist::ReduceOp::Sum, 0)), cat, "all_gather " + where);
  }
}

TEST(DistMpi, NonContiguousInputsAreReadInLogicalOrder) {
  require_world();
  const int n = dist::world_size();
  const std::vector<Host> ins = all_inputs(DType::F32, {4, 6});
  std::vector<Host> ts, ss;
  for (const Host& h : ins) {
    Host t = h;  // transposed [6, 4]
    t.shape = {6, 4};
    for (std::size_t i = 0; i < 4; ++i)
      for (std::size_t j = 0; j < 6; ++j) t.f[j * 4 + i] = h.f[i * 6 + j];
    ts.push_back(t);
    Host s = h;  // rows 0 and 2, columns 1, 3, 5
    s.shape = {2, 3};
    s.f.clear();
    for (std::size_t i : {0, 2})
      for (std::size_t j : {1, 3, 5}) s.f.push_back(h.f[i * 6 + j]);
    ss.push_back(s);
  }
  const Tensor<2> x = Tensor<2>::from_data(tt::encode(ins[static_cast<std::size_t>(dist::rank())]), dev());
  expect_host_eq(tt::read(dist::all_reduce(x.swap_dims(0, 1), dist::ReduceOp::Sum)), reduce_ref(ts, dist::ReduceOp::Sum),
                 "transposed all_reduce");
  Host cat = ss[0];
  cat.shape[0] = 2 * static_cast<std::size_t>(n);
  for (int r = 1; r < n; ++r) cat.f.insert(cat.f.end(), ss[static_cast<std::size_t>(r)].f.begin(), ss[static_cast<std::size_t>(r)].f.end());
  expect_host_eq(tt::read(dist::all_gather(x.slice({Slice::range(0, 4, 2), Slice::range(1, 6, 2)}))), cat, "sliced all_gather");
}

TEST(DistMpi, ZeroSizeInputs) {
  require_world();
  const Tensor<2> t = Tensor<2>::from_data(tt::encode(input(dist::rank(), DType::F32, {0, 5})), dev());
  EXPECT_EQ(dist::all_reduce(t, dist::ReduceOp::Sum).shape(), Shape({0, 5}));
  EXPECT_EQ(dist::all_reduce(t, dist::ReduceOp::Max).shape(), Shape({0, 5}));
  EXPECT_EQ(dist::broadcast(t, 1).shape(), Shape({0, 5}));
  EXPECT_EQ(dist::reduce_scatter(t, dist::ReduceOp::Mean).shape(), Shape({0, 5}));
  EXPECT_EQ(dist::all_gather(t).shape(), Shape({0, 5}));
}

TEST(DistMpi, ErrorsAreRefusedOnEveryRankAndLeaveTheGroupUsable) {
  require_world();
  const int n = dist::world_size();
  const Tensor<2> odd = Tensor<2>::from_data(tt::encode(input(dist::rank(), DType::F32, {static_cast<std::size_t>(2 * n + 1), 2})), dev());
  EXPECT_THROWS_FROM(ShapeError, "reduce_scatter", dist::reduce_scatter(odd, dist::ReduceOp::Sum), "divisible");
  EXPECT_THROWS_FROM(IndexError, "broadcast", dist::broadcast(odd, n), "root", "got " + std::to_string(n));
  EXPECT_THROWS_FROM(IndexError, "broadcast", dist::broadcast(odd, -1), "root", "got -1");
  const Tensor<2> sum = dist::all_reduce(odd, dist::ReduceOp::Sum);
  EXPECT_EQ(sum.shape(), odd.shape());
}

// From 64 KiB up the MPI communicator meets in a barrier, then makes the blocking call.
TEST(DistMpi, LargePayloadsOfEveryCollective) {
  require_world();
  const int n = dist::world_size();
  const auto mine = static_cast<std::size_t>(dist::rank());
  for (DType dt : {DType::F32, DType::I64}) {
    const std::vector<Host> ins = all_inputs(dt, {static_cast<std::size_t>(2 * n), 8192});  // 128 / 256 KiB per rank
    for (dist::ReduceOp op : {dist::ReduceOp::Sum, dist::ReduceOp::Max}) {
      const Host want = reduce_ref(ins, op);
      expect_host_eq(tt::decode(apply_host(Coll::all_reduce, ins[mine], op, 0)), want, "large all_reduce");
      expect_host_eq(tt::decode(apply_host(Coll::reduce_scatter, ins[mine], op, 0)), rows(want, 2 * mine, 2), "large reduce_scatter");
    }
    expect_host_eq(tt::decode(apply_host(Coll::broadcast, ins[mine], dist::ReduceOp::Sum, 1)), ins[1], "large broadcast");
    Host cat = ins[0];
    cat.shape[0] *= static_cast<std::size_t>(n);
    for (int r = 1; r < n; ++r) {
      cat.f.insert(cat.f.end(), ins[static_cast<std::size_t>(r)].f.begin(), ins[static_cast<std::size_t>(r)].f.end());
      cat.i.insert(cat.i.end(), ins[static_cast<std::size_t>(r)].i.begin(), ins[static_cast<std::size_t>(r)].i.end());
    }
    expect_host_eq(tt::decode(apply_host(Coll::all_gather, ins[mine], dist::ReduceOp::Sum, 0)), cat, "large all_gather");
  }
}

// Max and Min propagate NaN whichever rank holds it, as the host reduction of the in-process
// group does (MPI's built-in MPI_MAX would keep the other operand when the NaN comes first).
TEST(DistMpi, FloatMaxAndMinPropagateNaNFromAnyRank) {
  require_world();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (DType dt : {DType::F32, DType::F64}) {
    std::vector<float> v = {1.0f, 2.0f, 3.0f};
    v[static_cast<std::size_t>(dist::rank() % 2)] = nan;  // rank 0: element 0, rank 1: element 1
    const Tensor<1> t = Tensor<1>::from_data(TensorData::from(v).convert(dt), dev());
    for (dist::ReduceOp op : {dist::ReduceOp::Max, dist::ReduceOp::Min}) {
      const Host got = tt::read(dist::all_reduce(t, op));
      EXPECT_TRUE(std::isnan(got.f[0])) << tt::name(dt);
      EXPECT_TRUE(std::isnan(got.f[1])) << tt::name(dt);
      EXPECT_EQ(got.f[2], 3.0) << tt::name(dt);
    }
  }
}

TEST(DistMpi, RanksGetBitwiseIdenticalResults) {
  require_world();
  const int r = dist::rank();
  // Magnitudes over many binades, so the f32 sum depends on the order of its terms.
  std::vector<float> v(4099);
  for (std::size_t k = 0; k < v.size(); ++k)
    v[k] = static_cast<float>((k % 2 ? -1.0 : 1.0) * std::ldexp(1.0 + 0.123 * r + 0.0071 * static_cast<double>(k),
                                                                static_cast<int>((k * 7 + static_cast<std::size_t>(r) * 13) % 40) - 20));
  const Tensor<1> t = Tensor<1>::from_data(TensorData::from(v), dev());
  const Tensor<1> mean = dist::all_reduce(t, dist::ReduceOp::Mean);
  const TensorData every = dist::all_gather(mean).into_data();  // each rank's result, in rank order
  const std::size_t each = v.size() * sizeof(float);
  for (int q = 1; q < dist::world_size(); ++q)
    EXPECT_EQ(std::memcmp(every.bytes().data(), every.bytes().data() + each * static_cast<std::size_t>(q), each), 0) << "rank " << q;
}

// Data parallel: every rank trains the MLP (distributed_dp.hpp) on its B / N rows of each
// global batch with GradientSync (three buckets), 20 steps of Adam and of SGD; the same
// binary also trains it alone on the whole batch (no collectives). Tolerance: the batch gradient's float sum
// runs in another order (per-rank halves, then MPI's sum), ~1e-7 relative per step, which
// the updates carry on, so after 20 steps the parameters agree within 1e-5 relative
// (+1e-6 absolute near zero); the reference's measured equivalent (linear regression, 200
// SGD steps) was 1.5e-7 relative. The ranks agree bitwise (same calls on the same bytes).
TEST(DistMpi, DataParallelTrainsLikeOneProcessWithTheWholeBatch) {
  require_world();
  const int n = dist::world_size();
  ASSERT_EQ(dist_dp::kBatch % static_cast<std::size_t>(n), 0u) << "the global batch must divide among the ranks";
  for (const bool sgd : {false, true}) {
    const dist_dp::Trained mine = dist_dp::train_mlp(dev(), dist::rank(), n, 20, {dist::ReduceOp::Mean, 128, 64, true}, sgd);
    const dist_dp::Trained one = dist_dp::train_mlp(dev(), 0, 1, 20, {}, sgd);
    ASSERT_EQ(mine.names, one.names);
    std::vector<float> flat;
    for (std::size_t p = 0; p < one.values.size(); ++p) {
      ASSERT_EQ(mine.values[p].size(), one.values[p].size());
      for (std::size_t i = 0; i < one.values[p].size(); ++i)
        EXPECT_NEAR(mine.values[p][i], one.values[p][i], 1e-6 + 1e-5 * std::fabs(one.values[p][i]))
            << (sgd ? "sgd " : "adam ") << one.names[p] << "[" << i << "]";
      flat.insert(flat.end(), mine.values[p].begin(), mine.values[p].end());
    }
    const TensorData every = dist::all_gather(Tensor<1>::from_data(TensorData::from(flat), dev())).into_data();
    const std::size_t each = flat.size() * sizeof(float);
    for (int q = 1; q < n; ++q)
      EXPECT_EQ(std::memcmp(every.bytes().data(), every.bytes().data() + each * static_cast<std::size_t>(q), each), 0) << "rank " << q;
  }
}

// The CPU's all_reduce hands the buffer to MPI (from 64 KiB, the blocking call): a shared
// input is read where it lies and left unchanged, the result is a new tensor.
TEST(DistMpi, LargeAllReduceLeavesASharedInputUnchanged) {
  require_world();
  const int n = dist::world_size();
  std::vector<float> v(1 << 15);
  for (std::size_t k = 0; k < v.size(); ++k) v[k] = static_cast<float>(k % 97) + static_cast<float>(dist::rank());
  const Tensor<1> t = Tensor<1>::from_data(TensorData::from(v), dev());
  const std::vector<float> sum = dist::all_reduce(t, dist::ReduceOp::Sum).to_vec<float>();
  EXPECT_EQ(t.to_vec<float>(), v);
  const float ranks = static_cast<float>(n * (n - 1) / 2);
  for (std::size_t k = 0; k < v.size(); k += 1021)
    EXPECT_EQ(sum[k], static_cast<float>(n) * static_cast<float>(k % 97) + ranks) << k;
}

// all_reduce(std::move(t)): the CPU reduces the given-up buffer in place (the bench's
// libtensor column); the values are every rank's sum, small and large payloads alike.
TEST(DistMpi, AllReduceOfAMovedTensorReducesItsBuffer) {
  require_world();
  const int n = dist::world_size();
  for (const std::size_t size : {std::size_t{5}, std::size_t{1} << 15}) {
    std::vector<float> v(size);
    for (std::size_t k = 0; k < v.size(); ++k) v[k] = static_cast<float>(k % 89) + static_cast<float>(dist::rank());
    Tensor<1> t = Tensor<1>::from_data(TensorData::from(v), dev());
    const std::vector<float> sum = dist::all_reduce(std::move(t), dist::ReduceOp::Sum).to_vec<float>();
    ASSERT_EQ(sum.size(), size);
    const float ranks = static_cast<float>(n * (n - 1) / 2);
    for (std::size_t k = 0; k < size; k += 7) EXPECT_EQ(sum[k], static_cast<float>(n) * static_cast<float>(k % 89) + ranks) << k;
  }
}

// Under TENSOR_DIST_CHECK=1, calls that disagree are refused on every rank before any data
// moves, naming the rank that differs; the group stays usable.
TEST(DistMpiCheck, RanksThatDisagreeAreNamed) {
  require_world();
  ASSERT_STREQ(std::getenv("TENSOR_DIST_CHECK"), "1") << "this group runs with TENSOR_DIST_CHECK=1";
  const int r = dist::rank();
  const Tensor<1> t = Tensor<1>::from_data(tt::encode(input(r, DType::F32, {r == 1 ? 4u : 3u})), dev());
  EXPECT_THROWS_FROM(ShapeError, "all_reduce", dist::all_reduce(t, dist::ReduceOp::Sum), "on rank 1", "[4]", "[3]");
  const Tensor<1> u = Tensor<1>::from_data(tt::encode(input(r, r == 1 ? DType::F64 : DType::F32, {3})), dev());
  EXPECT_THROWS_FROM(DTypeError, "all_gather", dist::all_gather(u), "on rank 1", "f64");
  const Tensor<1> w = Tensor<1>::from_data(tt::encode(input(r, DType::F32, {2})), dev());
  EXPECT_THROWS_FROM(ExecutionError, "all_reduce", dist::all_reduce(w, r == 1 ? dist::ReduceOp::Max : dist::ReduceOp::Sum), "on rank 1");
  // Rank 1 calls broadcast where rank 0 calls all_reduce: refused on both (each names its own op).
  if (r == 1) {
    EXPECT_THROWS_FROM(ExecutionError, "broadcast", dist::broadcast(w, 0), "on rank 1", "all_reduce");
  } else {
    EXPECT_THROWS_FROM(ExecutionError, "all_reduce", dist::all_reduce(w, dist::ReduceOp::Sum), "on rank 1", "broadcast");
  }
  // Still usable: a matching call goes through.
  expect_host_eq(tt::read(dist::all_reduce(w, dist::ReduceOp::Max)),
                 reduce_ref(all_inputs(DType::F32, {2}), dist::ReduceOp::Max), "all_reduce after refusals");
}

// A rank that throws (here: a failure it catches, so the process stays to report) and never
// joins the collective makes the others fail with ExecutionError after TENSOR_DIST_TIMEOUT_S
// instead of hanging; the group then refuses every later collective. Small payloads wait in
// the non-blocking collective itself, large ones (>= 64 KiB) in the arrival barrier before the
// blocking call: one test each, in its own mpirun run.
void a_rank_that_throws(std::size_t elements) {
  require_world();
  ASSERT_NE(std::getenv("TENSOR_DIST_TIMEOUT_S"), nullptr) << "this group runs with a short TENSOR_DIST_TIMEOUT_S";
  const Tensor<1> t = Tensor<1>::from_data(tt::encode(input(dist::rank(), DType::F32, {elements})), dev());
  (void)dist::all_reduce(t, dist::ReduceOp::Sum);  // #1 on every rank
  if (dist::rank() == 1) {
    EXPECT_THROWS(std::runtime_error, [] { throw std::runtime_error("rank one gives up"); }(), "gives up");
    return;  // never joins #2
  }
  std::string msg;
  try {
    (void)dist::all_reduce(t, dist::ReduceOp::Sum);
  } catch (const ExecutionError& e) {
    msg = e.what();
  }
  EXPECT_EQ(msg.rfind("[all_reduce]", 0), 0u) << msg;
  EXPECT_NE(msg.find("#2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rank 0 of"), std::string::npos) << msg;
  EXPECT_NE(msg.find("TENSOR_DIST_TIMEOUT_S"), std::string::npos) << msg;
  EXPECT_THROWS_FROM(ExecutionError, "barrier", dist::barrier(), "failed earlier", "#2 timed out");
}

TEST(DistMpiFail, ARankThatThrowsMakesTheOthersFailInsteadOfHanging) { a_rank_that_throws(3); }
TEST(DistMpiFailLarge, ARankThatThrowsMakesTheOthersFailInsteadOfHanging) { a_rank_that_throws(std::size_t{1} << 16); }

// A rank whose backward throws mid-pass (GradientSync's overlap on: the other rank's buckets
// are already on its communication thread) makes the other fail within TENSOR_DIST_TIMEOUT_S
// with an ExecutionError naming the collective, instead of hanging. Rank 1 fails through an
// op hook after four of its backward ops and catches the error so the process stays to report.
struct ThrowInBackward final : tensor::dispatch::OpHook {
  int left = 4;
  void around(tensor::dispatch::OpCall& c, const tensor::dispatch::OpNext& next) override {
    if (c.op != OpCode::all_reduce && --left == 0) throw std::runtime_error("rank 1 fails mid-backward");
    next(c);
  }
};

TEST(DistMpiFailBackward, ARankThatThrowsMidBackwardFailsTheOthers) {
  require_world();
  ASSERT_NE(std::getenv("TENSOR_DIST_TIMEOUT_S"), nullptr) << "this group runs with a short TENSOR_DIST_TIMEOUT_S";
  const Device ad = dev().autodiff();
  dist_dp::Mlp m(ad);
  m.fc1.weight = Tensor<2>::from_data(dist_dp::formula(dist_dp::kIn, dist_dp::kHidden, 0.7, 0.3, 0), ad).require_grad();
  m.fc2.weight = Tensor<2>::from_data(dist_dp::formula(dist_dp::kHidden, dist_dp::kOut, 0.4, 0.9, 0), ad).require_grad();
  dist::GradientSyncOptions o;
  o.overlap = 1;
  dist::GradientSync sync(m, o);
  ASSERT_TRUE(sync.overlap());
  const Tensor<2> x = Tensor<2>::from_data(dist_dp::formula(4, dist_dp::kIn, 0.3, 0.2, dist::rank()), ad);
  const Tensor<1> loss = m.forward(x).square().mean();
  ThrowInBackward thrower;
  if (dist::rank() == 1) tensor::dispatch::add_thread_hook(&thrower);
  std::string msg;
  try {
    Gradients g = loss.backward();
    sync.sync(g);
    ADD_FAILURE() << "rank " << dist::rank() << ": the step went through";
  } catch (const ExecutionError& e) {
    msg = e.what();
  } catch (const std::runtime_error& e) {
    msg = e.what();
  }
  if (dist::rank() == 1) {
    tensor::dispatch::remove_thread_hook(&thrower);
    EXPECT_EQ(msg, "rank 1 fails mid-backward");
  } else {
    EXPECT_EQ(msg.rfind("[all_reduce]", 0), 0u) << msg;
    EXPECT_NE(msg.find("TENSOR_DIST_TIMEOUT_S"), std::string::npos) << msg;
  }
}

}  // namespace
