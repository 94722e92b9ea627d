// What every benchmark prints its figures with: the median of its timings and the load
// average it ran under (these machines are shared; a figure without its load means little).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace tensor_bench {

// The median (the mean of the middle two for an even count); v is taken by value and sorted.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  if (n == 0) return 0.0;
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// A duration in seconds as "1.25 ms", "3.4 us" or "72 ns".
inline std::string fmt_time(double s) {
  char b[32];
  if (s >= 1e-3) std::snprintf(b, sizeof b, "%.2f ms", s * 1e3);
  else if (s >= 1e-6) std::snprintf(b, sizeof b, "%.1f us", s * 1e6);
  else std::snprintf(b, sizeof b, "%.0f ns", s * 1e9);
  return b;
}

// "/proc/loadavg"'s three averages ("0.52 0.61 0.70"), or "unknown".
inline std::string loadavg() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return f ? a + " " + b + " " + c : "unknown";
}

// Process CPU time (all threads), seconds.
inline double cpu_s() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// CPU time the whole machine spent busy (every CPU, /proc/stat's user + nice + system +
// irq + softirq + steal), seconds, at the kernel's tick resolution (10 ms here); -1 if unreadable.
inline double machine_busy_s() {
  std::ifstream f("/proc/stat");
  std::string cpu;
  long long v[8] = {};
  f >> cpu;
  for (long long& x : v) f >> x;
  if (!f || cpu != "cpu") return -1.0;
  const double tick = 1.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
  return static_cast<double>(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) * tick;
}

// How many cores other processes kept busy since construction: the machine's busy CPU time
// less this process's, over the wall time. A 2-thread row measured while another process
// held a core ran on one core's share (the kernel's per-session fair share, autogroup: see
// docs/benchmarks.md, issue 33's slow mode); this says so beside the figure. Resolution
// about 2 ticks over the window (0.2 cores over 100 ms); -1 where /proc/stat is unreadable.
class OthersLoad {
 public:
  OthersLoad() : wall0_(std::chrono::steady_clock::now()), busy0_(machine_busy_s()), cpu0_(cpu_s()) {}
  double cores() const {
    const double busy = machine_busy_s();
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0_).count();
    if (busy < 0 || busy0_ < 0 || wall <= 0) return -1.0;
    return std::max(0.0, (busy - busy0_) - (cpu_s() - cpu0_)) / wall;
  }

 private:
  std::chrono::steady_clock::time_point wall0_;
  double busy0_, cpu0_;
};

// `reps` interleaved rounds of the reference f() then g(), each followed by dev.sync(): the
// median wall time and median process CPU time (all threads) of each, seconds.
struct Paired {
  double f_wall, g_wall, f_cpu, g_cpu;
};
template <class Dev, class F, class G>
Paired time_paired(const Dev& dev, int reps, F&& f, G&& g) {
  using Clock = std::chrono::steady_clock;
  std::vector<double> tf, tg, cf, cg;
  for (int r = 0; r < reps; ++r) {
    const double c0 = cpu_s();
    const auto t0 = Clock::now();
    f();
    dev.sync();
    const double c1 = cpu_s();
    const auto t1 = Clock::now();
    g();
    dev.sync();
    const auto t2 = Clock::now();
    const double c2 = cpu_s();
    tf.push_back(std::chrono::duration<double>(t1 - t0).count());
    tg.push_back(std::chrono::duration<double>(t2 - t1).count());
    cf.push_back(c1 - c0);
    cg.push_back(c2 - c1);
  }
  return {median(tf), median(tg), median(cf), median(cg)};
}

}  // namespace tensor_bench
