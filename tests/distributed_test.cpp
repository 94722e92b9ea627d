// tensor::dist on the in-process group (LocalGroup: ranks as threads) and the singleton world,
// on TENSOR_TEST_DEVICE (cpu when unset): every collective x dtype x ReduceOp with 1, 2 and 3
// ranks against values reduced here in rank order, non-contiguous and zero-size inputs, root
// != 0, the errors, the watchdog, and bitwise-identical results across ranks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <latch>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include <tensor/distributed.hpp>

#include "distributed_dp.hpp"
#include "distributed_ref.hpp"
#include "test_util.hpp"

namespace {

using namespace tensor;
using tt::Host;
using namespace dist_ref;

TEST(Distributed, SingletonWorldReturnsItsInput) {
  dist::init();
  dist::init();  // idempotent
  EXPECT_EQ(dist::world_size(), 1);
  EXPECT_EQ(dist::rank(), 0);
  const Host h = input(0, DType::F32, {2, 3});
  const Tensor<2> t = Tensor<2>::from_data(tt::encode(h), dev());
  for (dist::ReduceOp op : kOps) expect_host_eq(tt::read(dist::all_reduce(t, op)), h, "all_reduce");
  expect_host_eq(tt::read(dist::broadcast(t, 0)), h, "broadcast");
  expect_host_eq(tt::read(dist::all_gather(t)), h, "all_gather");
  expect_host_eq(tt::read(dist::reduce_scatter(t, dist::ReduceOp::Sum)), h, "reduce_scatter");
  dist::barrier();
  EXPECT_THROWS_FROM(IndexError, "broadcast", dist::broadcast(t, 1), "root", "got 1");
}

// Run by meson as distributed_mpirun_guard with OMPI_COMM_WORLD_SIZE=2 (the first use of the
// process group in that process): several mpirun processes but no MPI communicator built in.
TEST(Distributed, InitRefusesToRunAloneUnderMpirun) {
  const char* env = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (!env || std::string(env) == "1") GTEST_SKIP() << "only with OMPI_COMM_WORLD_SIZE > 1";
  EXPECT_THROWS_FROM(DeviceError, "init", dist::init(), "processes", "MPI");
  EXPECT_THROWS_FROM(DeviceError, "init", dist::world_size(), "processes");
}

TEST(Distributed, EveryCollectiveDTypeAndOpOnOneTwoAndThreeRanks) {
  std::string tested;
  for (DType dt : kDTypes) {
    if (!dev().supports_dtype(dt)) continue;
    tested += std::string(tt::name(dt)) + " ";
    for (int n : {1, 2, 3}) {
      std::vector<Host> ins;
      for (int r = 0; r < n; ++r) ins.push_back(input(r, dt, {static_cast<std::size_t>(2 * n), 3}));
      const std::string where = std::string(tt::name(dt)) + " on " + std::to_string(n) + " ranks";
      for (dist::ReduceOp op : kOps) {
        const Host want = reduce_ref(ins, op);
        const std::string w = where + ", op " + std::to_string(static_cast<int>(op));
        auto ar = on_group(n, [&](int r) { return apply_host(Coll::all_reduce, ins[static_cast<std::size_t>(r)], op, 0); });
        for (int r = 0; r < n; ++r) expect_host_eq(tt::decode(ar[static_cast<std::size_t>(r)]), want, "all_reduce " + w);
        auto rs = on_group(n, [&](int r) { return apply_host(Coll::reduce_scatter, ins[static_cast<std::size_t>(r)], op, 0); });
        for (int r = 0; r < n; ++r)
          expect_host_eq(tt::decode(rs[static_cast<std::size_t>(r)]), rows(want, 2 * static_cast<std::size_t>(r), 2), "reduce_scatter " + w);
      }
      const int root = n - 1;  // != 0 from two ranks up
      auto bc = on_group(n, [&](int r) { return apply_host(Coll::broadcast, ins[static_cast<std::size_t>(r)], dist::ReduceOp::Sum, root); });
      for (int r = 0; r < n; ++r) expect_host_eq(tt::decode(bc[static_cast<std::size_t>(r)]), ins[static_cast<std::size_t>(root)], "broadcast " + where);
      Host cat = ins[0];
      cat.shape[0] *= static_cast<std::size_t>(n);
      for (int r = 1; r < n; ++r) {
        cat.f.insert(cat.f.end(), ins[static_cast<std::size_t>(r)].f.begin(), ins[static_cast<std::size_t>(r)].f.end());
        cat.i.insert(cat.i.end(), ins[static_cast<std::size_t>(r)].i.begin(), ins[static_cast<std::size_t>(r)].i.end());
      }
      auto ag = on_group(n, [&](int r) { return apply_host(Coll::all_gather, ins[static_cast<std::size_t>(r)], dist::ReduceOp::Sum, 0); });
      for (int r = 0; r < n; ++r) expect_host_eq(tt::decode(ag[static_cast<std::size_t>(r)]), cat, "all_gather " + where);
    }
  }
  ::testing::Test::RecordProperty("dtypes", tested);
  EXPECT_NE(tested.find("f32"), std::string::npos) << "every device has f32: " << tested;
  EXPECT_NE(tested.find("i32"), std::string::npos) << "every device has i32: " << tested;
}

TEST(Distributed, ResultsStayOnTheInputsDevice) {
  dist::LocalGroup group(2);
  group.run([&](int r) {
    const Tensor<1> t = Tensor<1>::from_data(tt::encode(input(r, DType::F32, {4})), dev());
    EXPECT_EQ(dist::all_reduce(t, dist::ReduceOp::Sum).device(), dev());
    EXPECT_EQ(dist::all_gather(t).device(), dev());
  });
}

TEST(Distributed, NonContiguousInputsAreReadInLogicalOrder) {
  const int n = 2;
  std::vector<Host> ins;
  for (int r = 0; r < n; ++r) ins.push_back(input(r, DType::F32, {4, 6}));
  // The transposed [6, 4] and the sliced rows 0 and 2, columns 1, 3, 5 of each input.
  auto transposed = [](const Host& h) {
    Host t = h;
    t.shape = {h.shape[1], h.shape[0]};
    for (std::size_t i = 0; i < h.shape[0]; ++i)
      for (std::size_t j = 0; j < h.shape[1]; ++j) t.f[j * h.shape[0] + i] = h.f[i * h.shape[1] + j];
    return t;
  };
  auto sliced = [](const Host& h) {
    Host s = h;
    s.shape = {2, 3};
    s.f.clear();
    for (std::size_t i : {0, 2})
      for (std::size_t j : {1, 3, 5}) s.f.push_back(h.f[i * h.shape[1] + j]);
    return s;
  };
  std::vector<Host> ts, ss;
  for (const Host& h : ins) {
    ts.push_back(transposed(h));
    ss.push_back(sliced(h));
  }
  auto out_t = on_group(n, [&](int r) {
    const Tensor<2> t = Tensor<2>::from_data(tt::encode(ins[static_cast<std::size_t>(r)]), dev()).swap_dims(0, 1);
    return dist::all_reduce(t, dist::ReduceOp::Sum).into_data();
  });
  auto out_s = on_group(n, [&](int r) {
    const Tensor<2> t = Tensor<2>::from_data(tt::encode(ins[static_cast<std::size_t>(r)]), dev())
                            .slice({Slice::range(0, 4, 2), Slice::range(1, 6, 2)});
    return dist::all_gather(t).into_data();
  });
  Host cat = ss[0];
  cat.shape[0] = 4;
  cat.f.insert(cat.f.end(), ss[1].f.begin(), ss[1].f.end());
  for (int r = 0; r < n; ++r) {
    expect_host_eq(tt::decode(out_t[static_cast<std::size_t>(r)]), reduce_ref(ts, dist::ReduceOp::Sum), "transposed all_reduce");
    expect_host_eq(tt::decode(out_s[static_cast<std::size_t>(r)]), cat, "sliced all_gather");
  }
}

TEST(Distributed, ZeroSizeInputs) {
  auto out = on_group(3, [&](int r) {
    const Tensor<2> t = Tensor<2>::from_data(tt::encode(input(r, DType::F32, {0, 5})), dev());
    EXPECT_EQ(dist::all_reduce(t, dist::ReduceOp::Max).shape(), Shape({0, 5}));
    EXPECT_EQ(dist::broadcast(t, 2).shape(), Shape({0, 5}));
    EXPECT_EQ(dist::reduce_scatter(t, dist::ReduceOp::Sum).shape(), Shape({0, 5}));
    return dist::all_gather(t).into_data();
  });
  for (const TensorData& d : out) EXPECT_EQ(d.shape(), Shape({0, 5}));
}

TEST(Distributed, RanksGetBitwiseIdenticalAllReduceResults) {
  const int n = 3;
  // Magnitudes spread over many binades, so the f32 sum depends on the order of its terms.
  auto out = on_group(n, [&](int r) {
    std::vector<float> v(257);
    for (std::size_t k = 0; k < v.size(); ++k)
      v[k] = static_cast<float>((k % 2 ? -1.0 : 1.0) * std::ldexp(1.0 + 0.123 * r + 0.0071 * static_cast<double>(k), static_cast<int>((k * 7 + static_cast<std::size_t>(r) * 13) % 40) - 20));
    const Tensor<1> t = Tensor<1>::from_data(TensorData::from(v), dev());
    return dist::all_reduce(t, dist::ReduceOp::Mean).into_data();
  });
  for (int r = 1; r < n; ++r) EXPECT_EQ(out[static_cast<std::size_t>(r)].bytes(), out[0].bytes()) << "rank " << r;
}

TEST(Distributed, RankAndWorldSizeInsideTheGroup) {
  std::vector<int> ranks(3, -1), sizes(3, -1);
  dist::LocalGroup group(3);
  group.run([&](int r) {
    ranks[static_cast<std::size_t>(r)] = dist::rank();
    sizes[static_cast<std::size_t>(r)] = dist::world_size();
    dist::barrier();
  });
  EXPECT_EQ(ranks, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(sizes, (std::vector<int>{3, 3, 3}));
  EXPECT_EQ(dist::world_size(), 1);  // outside run: the process group again
}

TEST(Distributed, Errors) {
  dist::LocalGroup group(2);
  group.run([&](int r) {
    const Tensor<2> odd = Tensor<2>::from_data(tt::encode(input(r, DType::F32, {5, 2})), dev());
    EXPECT_THROWS_FROM(ShapeError, "reduce_scatter", dist::reduce_scatter(odd, dist::ReduceOp::Sum), "divisible", "[5, 2]");
    EXPECT_THROWS_FROM(IndexError, "broadcast", dist::broadcast(odd, 2), "root", "got 2");
    EXPECT_THROWS_FROM(IndexError, "broadcast", dist::broadcast(odd, -1), "root", "got -1");
    Tensor<2> gone = odd;
    const Tensor<2> taken = std::move(gone);
    EXPECT_THROWS_FROM(Error, "all_reduce", dist::all_reduce(gone, dist::ReduceOp::Sum), "moved-from");
    EXPECT_THROWS_FROM(Error, "all_gather", dist::all_gather(gone), "moved-from");
    EXPECT_THROWS_FROM(Error, "all_reduce", dist::all_reduce(odd, static_cast<dist::ReduceOp>(9)), "ReduceOp");
    // The group is still usable after refused calls (none of them reached the rendezvous).
    EXPECT_EQ(tt::read(dist::all_reduce(taken, dist::ReduceOp::Max)).shape, (std::vector<std::size_t>{5, 2}));
  });
  EXPECT_THROWS_FROM(IndexError, "LocalGroup", dist::LocalGroup(0), "size", "got 0");
}

TEST(Distributed, RanksThatDisagreeOnShapeOrDTypeAreNamed) {
  dist::LocalGroup group(2);
  std::mutex m;
  std::vector<std::string> shape_msgs, dtype_msgs;
  group.run([&](int r) {
    const Tensor<1> t = Tensor<1>::from_data(tt::encode(input(r, DType::F32, {r == 0 ? 3u : 4u})), dev());
    try {
      (void)dist::all_reduce(t, dist::ReduceOp::Sum);
    } catch (const ShapeError& e) {
      std::lock_guard<std::mutex> l(m);
      shape_msgs.push_back(e.what());
    }
    if (!dev().supports_dtype(DType::F64)) return;
    const Tensor<1> u = Tensor<1>::from_data(tt::encode(input(r, r == 0 ? DType::F32 : DType::F64, {3})), dev());
    try {
      (void)dist::all_gather(u);
    } catch (const DTypeError& e) {
      std::lock_guard<std::mutex> l(m);
      dtype_msgs.push_back(e.what());
    }
  });
  ASSERT_EQ(shape_msgs.size(), 2u);
  for (const std::string& s : shape_msgs) {
    EXPECT_EQ(s.rfind("[all_reduce]", 0), 0u) << s;
    EXPECT_NE(s.find("on rank 1"), std::string::npos) << s;
  }
  if (dev().supports_dtype(DType::F64)) {
    ASSERT_EQ(dtype_msgs.size(), 2u);
    for (const std::string& s : dtype_msgs) EXPECT_NE(s.find("f64"), std::string::npos) << s;
  }
}

TEST(Distributed, WatchdogNamesTheOpAndItsSequenceNumber) {
  ::setenv("TENSOR_DIST_TIMEOUT_S", "0.2", 1);
  dist::LocalGroup group(2);
  ::unsetenv("TENSOR_DIST_TIMEOUT_S");
  std::latch release(1);
  std::string msg;
  bool threw = false;
  group.run([&](int r) {
    const Tensor<1> t = Tensor<1>::from_data(tt::encode(input(r, DType::F32, {3})), dev());
    (void)dist::all_reduce(t, dist::ReduceOp::Sum);  // #1: both ranks
    if (r == 1) {
      release.wait();  // never joins #2, but stays in the group
      return;
    }
    try {
      (void)dist::all_reduce(t, dist::ReduceOp::Sum);
    } catch (const ExecutionError& e) {
      threw = true;
      msg = e.what();
    }
    release.count_down();
  });
  ASSERT_TRUE(threw);
  EXPECT_EQ(msg.rfind("[all_reduce]", 0), 0u) << msg;
  EXPECT_NE(msg.find("#2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("TENSOR_DIST_TIMEOUT_S"), std::string::npos) << msg;
}

TEST(Distributed, BadTimeoutSettingIsRefused) {
  ::setenv("TENSOR_DIST_TIMEOUT_S", "soon", 1);
  EXPECT_THROWS_FROM(Error, "LocalGroup", dist::LocalGroup(2), "TENSOR_DIST_TIMEOUT_S", "soon");
  ::unsetenv("TENSOR_DIST_TIMEOUT_S");
}

TEST(Distributed, ARankThatThrowsFailsTheOthersAndRunRethrows) {
  // The default timeout (300 s): the other rank must fail because rank 1 threw, not time out.
  dist::LocalGroup group(2);
  std::string msg;
  EXPECT_THROWS(std::runtime_error, group.run([&](int r) {
    if (r == 1) throw std::runtime_error("rank one gives up");
    try {
      dist::barrier();
    } catch (const ExecutionError& e) {
      msg = e.what();
    }
  }), "rank one gives up");
  EXPECT_EQ(msg.rfind("[barrier]", 0), 0u) << msg;
  EXPECT_NE(msg.find("rank 1 threw: rank one gives up"), std::string::npos) << msg;
}

TEST(Distributed, ARankThatReturnsEarlyFailsTheOthers) {
  dist::LocalGroup group(2);
  std::string msg;
  group.run([&](int r) {
    if (r == 1) return;
    try {
      dist::barrier();
    } catch (const ExecutionError& e) {
      msg = e.what();
    }
  });
  EXPECT_NE(msg.find("rank 1 returned"), std::string::npos) << msg;
}

// Collectives have burn's backward now (op table rows with autodiff rows); Max and Min,
// which have none, are still refused on a tracked tensor.
TEST(Distributed, TrackedMaxAndMinAreRefused) {
  const Device ad = dev().autodiff();
  dist::LocalGroup group(2);
  group.run([&](int r) {
    const Tensor<1> t = Tensor<1>::from_data(tt::encode(input(r, DType::F32, {3})), ad).require_grad();
    EXPECT_THROWS_FROM(NotImplemented, "all_reduce", dist::all_reduce(t, dist::ReduceOp::Max), "autodiff");
    const Tensor<1> t4 = Tensor<1>::from_data(tt::encode(input(r, DType::F32, {4})), ad).require_grad();
    EXPECT_THROWS_FROM(NotImplemented, "reduce_scatter", dist::reduce_scatter(t4, dist::ReduceOp::Min), "autodiff");
    // Untracked (detached) values reduce as before.
    EXPECT_EQ(dist::all_reduce(t.detach(), dist::ReduceOp::Max).to_vec<float>().size(), 3u);
  });
}

// The gradient of every rank's loss L_r = sum(y_r * w_r) with respect to x_s, by the chain
// rule written out: w_r is a formula of (r, i), and each collective's y is a known sum or
// copy of the x's.
float w(int r, std::size_t i) { return static_cast<float>(r + 1) * 0.5f + static_cast<float>(i) - 1.25f * static_cast<float>(r * i); }
Tensor<1> weights(int r, std::size_t n, const Device& d) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = w(r, i);
  return Tensor<1>::from_data(TensorData::from(v, Shape{n}), d);
}

TEST(Distributed, CollectiveGradientsSumEveryRanksLoss) {
  const Device ad = dev().autodiff();
  dist::LocalGroup group(2);
  std::mutex m;
  group.run([&](int r) {
    auto x_of = [&](std::size_t n) {
      std::vector<float> v(n);
      for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(r + 1) * static_cast<float>(i + 1);
      return Tensor<1>::from_data(TensorData::from(v, Shape{n}), ad).require_grad();
    };
    auto grad_of = [&](const Tensor<1>& x, const Tensor<1>& y) {
      const Tensor<1> loss = (y * weights(r, y.shape()[0], ad)).sum();
      const Gradients g = loss.backward();
      return x.grad(g)->to_vec<float>();
    };
    std::vector<float> sum_w(4), none(4, 0.0f);
    for (std::size_t i = 0; i < 4; ++i) sum_w[i] = w(0, i) + w(1, i);
    const Tensor<1> x = x_of(3);
    const auto g_sum = grad_of(x, dist::all_reduce(x, dist::ReduceOp::Sum));
    const auto g_mean = grad_of(x, dist::all_reduce(x, dist::ReduceOp::Mean));
    const auto g_bcast = grad_of(x, dist::broadcast(x, 1));
    const Tensor<1> x2 = x_of(2);
    const auto g_gather = grad_of(x2, dist::all_gather(x2));  // y = [x_0, x_1]
    const Tensor<1> x4 = x_of(4);
    const auto g_scatter = grad_of(x4, dist::reduce_scatter(x4, dist::ReduceOp::Sum));  // y_r = (x_0 + x_1)[2r, 2r + 2)
    std::lock_guard<std::mutex> l(m);
    for (std::size_t i = 0; i < 3; ++i) {
      EXPECT_FLOAT_EQ(g_sum[i], sum_w[i]) << "rank " << r << " i " << i;
      EXPECT_FLOAT_EQ(g_mean[i], sum_w[i] / 2) << "rank " << r << " i " << i;
      EXPECT_FLOAT_EQ(g_bcast[i], r == 1 ? sum_w[i] : 0.0f) << "rank " << r << " i " << i;  // the root gets it all
    }
    for (std::size_t i = 0; i < 2; ++i)  // block r of every rank's weights
      EXPECT_FLOAT_EQ(g_gather[i], w(0, 2 * static_cast<std::size_t>(r) + i) + w(1, 2 * static_cast<std::size_t>(r) + i)) << "rank " << r;
    for (std::size_t i = 0; i < 4; ++i)  // rank i / 2's weights, element i % 2
      EXPECT_FLOAT_EQ(g_scatter[i], w(static_cast<int>(i / 2), i % 2)) << "rank " << r << " i " << i;
  });
}

// GradientSync's buckets: reverse visit order, the first up to first_bucket_bytes, the
// others up to bucket_bytes, a larger parameter alone. The MLP's parameters in reverse:
// fc2.bias 12 B, fc2.weight 96 B, fc1.bias 32 B, fc1.weight 192 B.
TEST(Distributed, GradientSyncBucketsInReverseOrderUpToTheCaps) {
  dist_dp::Mlp m(dev().autodiff());
  const dist::GradientSync small(m, {dist::ReduceOp::Mean, 128, 64, true});
  const std::vector<std::vector<std::string>> want = {{"fc2.bias"}, {"fc2.weight", "fc1.bias"}, {"fc1.weight"}};
  EXPECT_EQ(small.buckets(), want);
  const dist::GradientSync large(m);
  const std::vector<std::vector<std::string>> one = {{"fc2.bias", "fc2.weight", "fc1.bias", "fc1.weight"}};
  EXPECT_EQ(large.buckets(), one);
  EXPECT_EQ(large.bucket_bytes(), std::size_t{25} << 20);
  EXPECT_THROWS_FROM(Error, "GradientSync", dist::GradientSync(m, {dist::ReduceOp::Max}), "Sum or Mean");
}

// 2 ranks x B/2 rows with GradientSync against 1 x B rows, same initial parameters (rank 1
// starts elsewhere: the sync broadcasts rank 0's). Tolerance: the batch's gradient is
// summed in another order (two halves, then the all_reduce), ~1e-7 relative per step in
// f32; SGD's and Adam's updates (a ratio of such sums) carry it on, so after 5 steps the parameters agree to
// well within 1e-5 relative (+1e-6 absolute for elements near zero). The two ranks make the
// same calls on the same bytes, so they agree bitwise.
TEST(Distributed, GradientSyncTrainsLikeOneProcessWithTheWholeBatch) {
  for (const bool sgd : {false, true}) {
    const dist_dp::Trained one = dist_dp::train_mlp(dev(), 0, 1, 5, {}, sgd);
    std::vector<dist_dp::Trained> ranks(2);
    dist::LocalGroup group(2);
    group.run([&](int r) {
      ranks[static_cast<std::size_t>(r)] = dist_dp::train_mlp(dev(), r, 2, 5, {dist::ReduceOp::Mean, 128, 64, true}, sgd);
    });
    ASSERT_EQ(ranks[0].names, one.names);
    for (std::size_t p = 0; p < one.values.size(); ++p) {
      ASSERT_EQ(ranks[0].values[p].size(), one.values[p].size());
      EXPECT_EQ(ranks[0].values[p], ranks[1].values[p]) << one.names[p] << ": the ranks differ";
      for (std::size_t i = 0; i < one.values[p].size(); ++i)
        EXPECT_NEAR(ranks[0].values[p][i], one.values[p][i], 1e-6 + 1e-5 * std::fabs(one.values[p][i]))
            << (sgd ? "sgd " : "adam ") << one.names[p] << "[" << i << "]";
    }
  }
}

}  // namespace
