// Issue 33's "slow mode" repro: our 2-thread n = 256 f32 product (public API) timed before
// and after a 2-thread dnnl_sgemm in the same process; then each thread's CPU time, run-queue
// wait (/proc/self/task/*/schedstat), last CPU and affinity mask, and which thread / CPU ran
// each chunk of a parallel_chunks probe. Usage: slowmode_repro [ref-first|ours-first|none] [n]
// [reps per phase]; `blocks` / `blocks-ref` time 40 bench-like blocks of 21 products (the
// latter with 21 2-thread dnnl_sgemm after each) with 50 ms pauses, `blocks-probe` the same
// on parallel_chunks directly with the helper's share per block. TENSOR_CPU_MOVE_HELPERS=0
// turns off the pool's move of a helper off the caller's CPU for A/B runs.
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <tensor/tensor.hpp>

#include "backends/cpu/gemm.hpp"
#include "backends/cpu/parallel.hpp"

namespace {
using Clock = std::chrono::steady_clock;
double us_since(Clock::time_point t) { return std::chrono::duration<double, std::micro>(Clock::now() - t).count(); }
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
std::string mask_of(pid_t tid) {
  cpu_set_t s;
  CPU_ZERO(&s);
  if (sched_getaffinity(tid, sizeof s, &s) != 0) return "?";
  std::string r;
  for (int c = 0; c < 64; ++c)
    if (CPU_ISSET(c, &s)) r += (r.empty() ? "" : ",") + std::to_string(c);
  return r;
}
// Per-CPU busy and idle jiffies from /proc/stat.
std::vector<std::pair<long long, long long>> cpu_times() {
  std::ifstream f("/proc/stat");
  std::string line;
  std::vector<std::pair<long long, long long>> r;
  while (std::getline(f, line)) {
    if (line.rfind("cpu", 0) != 0 || line[3] == ' ') continue;
    long long v[8] = {};
    std::sscanf(line.c_str() + line.find(' '), "%lld %lld %lld %lld %lld %lld %lld %lld", &v[0], &v[1], &v[2], &v[3],
                &v[4], &v[5], &v[6], &v[7]);
    r.emplace_back(v[0] + v[1] + v[2] + v[5] + v[6] + v[7], v[3] + v[4]);
  }
  return r;
}
void dump_threads(const char* tag) {
  DIR* d = opendir("/proc/self/task");
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const std::string base = std::string("/proc/self/task/") + e->d_name;
    std::ifstream ss(base + "/schedstat"), cs(base + "/comm"), st(base + "/stat");
    unsigned long long run = 0, wait = 0, slices = 0;
    ss >> run >> wait >> slices;
    std::string comm, stat;
    std::getline(cs, comm);
    std::getline(st, stat);
    // field 39 (processor): after the ')' that closes comm, field 3 starts
    const auto p = stat.rfind(')');
    int field = 2, cpu = -1;
    for (std::size_t i = p + 1; i < stat.size(); ++i)
      if (stat[i] == ' ' && ++field == 39) { cpu = std::atoi(stat.c_str() + i + 1); break; }
    std::printf("%s tid %s run %.1f ms wait %.1f ms slices %llu cpu %d mask %s\n", tag, e->d_name, run / 1e6,
                wait / 1e6, slices, cpu, mask_of(static_cast<pid_t>(std::atoi(e->d_name))).c_str());
  }
  closedir(d);
}
}  // namespace

int main(int argc, char** argv) {
  using namespace tensor;
  const std::string order = argc > 1 ? argv[1] : "ref-first";
  const bool ref_first = order == "ref-first", no_ref = order == "none";
  const std::size_t n = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 256;
  const int reps2 = argc > 3 ? std::atoi(argv[3]) : 1000;
  const int nt = omp_get_max_threads();
  Device dev;
  const auto a = Tensor<2>::full({n, n}, 0.5f, dev), b = Tensor<2>::full({n, n}, 0.25f, dev);
  std::optional<Tensor<2>> c;
  std::vector<float> x(n * n, 0.5f), y(n * n, 0.25f), z(n * n);
  const auto dn = static_cast<dnnl_dim_t>(n);
  auto ref = [&](int reps) {
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) {
      const auto t0 = Clock::now();
      dnnl_sgemm('N', 'N', dn, dn, dn, 1.0f, x.data(), dn, y.data(), dn, 0.0f, z.data(), dn);
      t.push_back(us_since(t0));
    }
    return median(t);
  };
  auto ours = [&](int reps) {
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) {
      const auto t0 = Clock::now();
      c = a.matmul(b);
      dev.sync();
      t.push_back(us_since(t0));
    }
    return median(t);
  };
  // A timed block of ours with its wall time, this process's CPU time, and the CPU time
  // all other processes used in it (the machine's busy jiffies less ours): a slow block
  // with others' CPU near 0 is this process's doing, one near a core's worth is load.
  auto phase = [&](const char* name, int reps) {
    const auto s0 = cpu_times();
    timespec c0{}, c1{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    const auto w0 = Clock::now();
    const double med = ours(reps);
    const double wall = us_since(w0) / 1e3;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    const auto s1 = cpu_times();
    long long busy = 0;
    for (std::size_t i = 0; i < s1.size(); ++i) busy += s1[i].first - s0[i].first;
    const double own = static_cast<double>(c1.tv_sec - c0.tv_sec) * 1e3 + static_cast<double>(c1.tv_nsec - c0.tv_nsec) / 1e6;
    const double jiffy_ms = 1000.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
    std::printf("%s: median %.1f us, wall %.1f ms, our cpu %.1f ms (%.2f cores), others' cpu %.0f ms\n", name, med, wall,
                own, own / wall, static_cast<double>(busy) * jiffy_ms - own);
    return med;
  };
  // Bench-like blocks: 40 x (21 products of ours [, 21 2-thread dnnl_sgemm], 50 ms pause);
  // per block the median, the CPU the caller ended on and the CPU the helper last ran on.
  if (order == "blocks" || order == "blocks-ref") {
    ours(5);
    int slow = 0;
    std::string helper_stat;
    for (int blk = 0; blk < 40; ++blk) {
      const double med = ours(21);
      const int main_cpu = sched_getcpu();
      int helper_cpu = -1;
      DIR* d = opendir("/proc/self/task");
      while (dirent* e = readdir(d)) {
        if (e->d_name[0] == '.' || std::atol(e->d_name) == syscall(SYS_gettid)) continue;
        std::ifstream st(std::string("/proc/self/task/") + e->d_name + "/stat");
        std::string line;
        std::getline(st, line);
        const auto q = line.rfind(')');
        int field = 2;
        for (std::size_t i = q + 1; i < line.size(); ++i)
          if (line[i] == ' ' && ++field == 39) { helper_cpu = std::max(helper_cpu, std::atoi(line.c_str() + i + 1)); break; }
      }
      closedir(d);
      if (order == "blocks-ref") ref(21);
      slow += med > 1.5 * 150.0 * static_cast<double>(n * n * n) / (256.0 * 256.0 * 256.0);
      std::printf("block %d: median %.1f us, caller on cpu %d, other thread last on cpu %d\n", blk, med, main_cpu, helper_cpu);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::printf("blocks: %d of 40 slow\n", slow);
    return 0;
  }
  // The same blocks on parallel_chunks directly (4 slabs of n/4 rows, as a.matmul(b) splits
  // n = 256): per block the median job, the slabs the helper ran and when it started its first.
  if (order == "blocks-probe") {
    const long me = syscall(SYS_gettid);
    int slow = 0;
    for (int blk = 0; blk < 40; ++blk) {
      std::vector<double> job, start;
      int helper_slabs = 0;
      for (int r = 0; r < 21; ++r) {
        const auto t0 = Clock::now();
        std::atomic<double> first{-1.0};
        std::atomic<int> mine{0};
        auto body = [&](std::size_t ch) {
          if (syscall(SYS_gettid) != me) {
            double expect = -1.0;
            first.compare_exchange_strong(expect, us_since(t0));
            mine.fetch_add(1);
          }
          const tensor::cpu::GemmThreadScope one;
          const std::size_t q = n / 4, o = ch * q * n;
          tensor::cpu::sgemm(q, n, n, 1.0f, x.data() + o, dn, 1, y.data(), dn, 1, 0.0f, z.data() + o, dn, 1);
        };
        tensor::cpu::parallel_chunks(4, body);
        job.push_back(us_since(t0));
        helper_slabs += mine.load();
        if (first.load() >= 0) start.push_back(first.load());
      }
      const double med = median(job);
      slow += med > 1.5 * 150.0 * static_cast<double>(n * n * n) / (256.0 * 256.0 * 256.0);
      std::printf("pblock %d: median %.1f us, helper ran %d of 84 slabs, joined %zu of 21 jobs, median start %.1f us\n", blk,
                  med, helper_slabs, start.size(), start.empty() ? -1.0 : median(start));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::printf("blocks: %d of 40 slow\n", slow);
    return 0;
  }
  double r0 = 0;
  if (ref_first) r0 = ref(21);  // like the bench: the reference's team exists before our pool
  const double o1 = phase("ours1", reps2);
  const double r1 = no_ref ? 0.0 : ref(21);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const double o2 = phase("ours2", reps2);
  std::printf("n %zu threads %d order %s ref0 %.1f ours1 %.1f ref %.1f ours2 %.1f us\n", n, nt,
              order.c_str(), r0, o1, r1, o2);
  // Which thread and CPU run each chunk of a 2-chunk job of ~100 us chunks.
  struct Rec { long tid; int cpu0, cpu; double us; };
  std::vector<Rec> rec(400);
  const long main_tid = syscall(SYS_gettid);
  for (int j = 0; j < 200; ++j) {
    auto body = [&](std::size_t ch) {
      const tensor::cpu::GemmThreadScope one;
      const int cpu0 = sched_getcpu();
      const auto t0 = Clock::now();
      const std::size_t h = n / 2, o = ch * h * n;
      tensor::cpu::sgemm(h, n, n, 1.0f, x.data() + o, dn, 1, y.data(), dn, 1, 0.0f, z.data() + o, dn, 1);
      rec[static_cast<std::size_t>(j) * 2 + ch] = {syscall(SYS_gettid), cpu0, sched_getcpu(), us_since(t0)};
    };
    tensor::cpu::parallel_chunks(2, body);
  }
  int on_helper = 0, same_cpu = 0;
  std::vector<double> tm, th;
  for (const Rec& r : rec) (r.tid == main_tid ? tm : th).push_back(r.us);
  std::printf("probe slab (n/2 rows) us: main median %.1f (%zu), helper median %.1f (%zu)\n", tm.empty() ? 0 : median(tm),
              tm.size(), th.empty() ? 0 : median(th), th.size());
  for (int j = 0; j < 200; ++j) {
    const Rec& c0 = rec[j * 2];
    const Rec& c1 = rec[j * 2 + 1];
    on_helper += (c0.tid != main_tid) + (c1.tid != main_tid);
    same_cpu += c0.tid != c1.tid && c0.cpu == c1.cpu;
    if (j < 6 || j % 50 == 0)
      std::printf("  job %d: chunk0 tid+%ld cpu %d->%d %.0f us, chunk1 tid+%ld cpu %d->%d %.0f us\n", j, c0.tid - main_tid,
                  c0.cpu0, c0.cpu, c0.us, c1.tid - main_tid, c1.cpu0, c1.cpu, c1.us);
  }
  std::printf("probe: slabs on a helper %d/400, jobs split over 2 threads on one CPU %d/200\n", on_helper, same_cpu);
  dump_threads("thread");
  return 0;
}
