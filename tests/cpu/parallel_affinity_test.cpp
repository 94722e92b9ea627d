// parallel_chunks' helper threads may run on every CPU OpenMP's places cover, also when
// libgomp has pinned the thread that creates them (issue 33). Run with OMP_PROC_BIND=true
// (tests/cpu/meson.build): libgomp then pins the initial thread to its first place when it
// loads, and a helper created by that thread inherited the pin, so both threads of every
// 2-thread job shared one core.
#include <gtest/gtest.h>
#include <omp.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <set>
#include <string>

#include "backends/cpu/parallel.hpp"

namespace {

std::set<int> mask_of_this_thread() {
  cpu_set_t s;
  CPU_ZERO(&s);
  std::set<int> r;
  if (sched_getaffinity(0, sizeof s, &s) != 0) return r;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &s)) r.insert(c);
  return r;
}

// Every CPU in OpenMP's places, read place by place.
std::set<int> place_cpus() {
  std::set<int> r;
  for (int p = 0; p < omp_get_num_places(); ++p) {
    const int n = omp_get_place_num_procs(p);
    int ids[256];
    if (n <= 0 || n > 256) continue;
    omp_get_place_proc_ids(p, ids);
    for (int i = 0; i < n; ++i) r.insert(ids[i]);
  }
  return r;
}

TEST(ParallelAffinity, HelperNotPinnedToTheCallersPlace) {
  if (omp_get_max_threads() < 2 || omp_get_num_places() < 2)
    GTEST_SKIP() << "needs OMP_PROC_BIND=true and 2 places; got " << omp_get_num_places() << " places";
  // An OpenMP region first, as a program that ran oneDNN's threads before our first product.
  std::atomic<int> in_region{0};
#pragma omp parallel num_threads(2)
  in_region.fetch_add(1);
  ASSERT_EQ(in_region.load(), 2);
  const std::set<int> caller = mask_of_this_thread();
  const std::set<int> places = place_cpus();
  ASSERT_EQ(caller.size(), 1u) << "libgomp did not pin the initial thread (OMP_PROC_BIND unset?)";
  const long me = syscall(SYS_gettid);
  std::set<int> helper;
  // Jobs of two 2 ms chunks until a helper runs one (it may be descheduled for a while).
  for (int job = 0; job < 500 && helper.empty(); ++job) {
    std::set<int> seen;
    bool on_helper = false;
    auto body = [&](std::size_t) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(2);
      while (std::chrono::steady_clock::now() < until) {
      }
      if (syscall(SYS_gettid) != me) {
        seen = mask_of_this_thread();
        on_helper = true;
      }
    };
    tensor::cpu::parallel_chunks(2, body);
    if (on_helper) helper = seen;
  }
  ASSERT_FALSE(helper.empty()) << "no chunk ran on a helper in 500 jobs";
  EXPECT_EQ(helper, places);
  EXPECT_GT(helper.size(), caller.size());
}

}  // namespace
