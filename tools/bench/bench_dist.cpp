// tensorctl bench --only dist, run under `mpirun -np N`: all_reduce(Sum) of f32 CPU tensors
// from 1 KiB to 64 MiB through tensor::dist against a plain blocking MPI_Allreduce of the
// same buffer on MPI_COMM_WORLD, interleaved in one run so both see the same load. Medians;
// bandwidth is bytes / time (algorithm bandwidth); ratio = libtensor's bandwidth / MPI's
// (issue 27 target: >= 0.9 from 1 MiB up). "libtensor": all_reduce(std::move(t)), the
// buffer reduced in place as MPI's is (GradientSync's buckets take this path); "kept input":
// all_reduce(t) with t kept by the caller, which costs a fresh result buffer (its first-touch
// page faults) and MPI's out-of-place copy. Rank 0 prints.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <tensor/distributed.hpp>

#include "lib/src/distributed/communicator.hpp"
#include "tools/bench/bench_dist.hpp"

#include "tools/bench/bench_util.hpp"

namespace tensor_bench {
namespace {

using Clock = std::chrono::steady_clock;

std::string size_name(std::size_t bytes) {
  if (bytes >= (1u << 20)) return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes >> 10) + " KiB";
}

}  // namespace

int run_dist(bool quick) {
  using namespace tensor;
  dist::init();
  const int n = dist::world_size();
  const bool root = dist::rank() == 0;
  std::vector<float> probe(1, 1.0f);
  if (n < 2 || !dist::internal::mpi_raw_allreduce_sum_f32(probe.data(), probe.size())) {
    std::fprintf(stderr, "bench --only dist: expected an MPI group of 2+ processes (mpirun -np 2 tensorctl bench --only dist); got %s\n",
                 dist::describe().c_str());
    return 2;
  }
  if (root) {
    std::printf("tensorctl bench --only dist: all_reduce(Sum) f32 on cpu, %s\n", dist::describe().c_str());
    std::printf("load average at start: %s\n", loadavg().c_str());
    std::printf("%-8s %6s %14s %14s %12s %12s %7s %14s %7s\n", "size", "reps", "libtensor", "MPI_Allreduce", "lib GB/s", "MPI GB/s", "ratio",
                "kept input", "ratio");
  }
  const std::size_t max_bytes = quick ? (4u << 20) : (64u << 20);
  for (std::size_t bytes = 1024; bytes <= max_bytes; bytes *= 4) {
    const std::size_t count = bytes / sizeof(float);
    // About 0.2 s of MPI time per size and side at this machine's rates, at least 5 reps.
    const int reps = bytes <= (64u << 10) ? 200 : bytes <= (1u << 20) ? 50 : bytes <= (16u << 20) ? 11 : 5;
    std::vector<float> host(count);
    for (std::size_t i = 0; i < count; ++i) host[i] = static_cast<float>((i % 97) + dist::rank());
    const Tensor<1> t = Tensor<1>::from_data(TensorData::from(host), Device::cpu());
    Tensor<1> own = Tensor<1>::from_data(TensorData::from(host), Device::cpu());
    std::vector<float> raw = host;
    std::vector<double> lib_s, mpi_s, shared_s;
    for (int rep = -1; rep < reps; ++rep) {  // rep -1 warms both paths up
      dist::barrier();
      auto t0 = Clock::now();
      own = dist::all_reduce(std::move(own), dist::ReduceOp::Sum);
      const double a = std::chrono::duration<double>(Clock::now() - t0).count();
      dist::barrier();
      t0 = Clock::now();
      const Tensor<1> out = dist::all_reduce(t, dist::ReduceOp::Sum);
      const double c = std::chrono::duration<double>(Clock::now() - t0).count();
      dist::barrier();
      t0 = Clock::now();
      dist::internal::mpi_raw_allreduce_sum_f32(raw.data(), count);
      const double b = std::chrono::duration<double>(Clock::now() - t0).count();
      if (rep >= 0) {
        lib_s.push_back(a);
        mpi_s.push_back(b);
        shared_s.push_back(c);
      }
    }
    const double ml = median(lib_s), mm = median(mpi_s), ms = median(shared_s);
    if (root)
      std::printf("%-8s %6d %11.1f us %11.1f us %12.3f %12.3f %7.2f %11.1f us %7.2f\n", size_name(bytes).c_str(), reps, ml * 1e6,
                  mm * 1e6, static_cast<double>(bytes) / ml / 1e9, static_cast<double>(bytes) / mm / 1e9, mm / ml, ms * 1e6, mm / ms);
    std::fflush(stdout);
  }
  if (root) std::printf("load average at end: %s\n", loadavg().c_str());
  return 0;
}

}  // namespace tensor_bench
