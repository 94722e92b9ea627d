// The op profiler: a global hook that times each op (host wall clock, with a device
// sync off the CPU so queued GPU work is counted where it is issued) and sums calls,
// time and output bytes per (device, op).
#include "dispatch/profiler.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string_view>

#include "dispatch/hooks.hpp"

namespace tensor::dispatch {
namespace {

constexpr std::string_view kHostClock = "host wall time";
constexpr std::string_view kSyncedClock = "host wall time, device synced after each op";

class Profiler final : public OpHook {
 public:
  void around(OpCall& call, const OpNext& next) override {
    const auto t0 = std::chrono::steady_clock::now();
    next(call);
    // Off the CPU an op only queues work: wait for it so its time lands on this op.
    if (call.device.type_id != kCpuDeviceType) sync(call.device);
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
    std::uint64_t bytes = 0;
    for (const DispatchTensor& t : call.outputs)
      if (t.prim) bytes += t.shape().num_elements() * dtype_size(t.dtype());
    const std::lock_guard<std::mutex> lock(mutex_);
    Acc& a = acc_[{call.device, call.op}];
    a.calls += 1;
    a.ns += static_cast<std::uint64_t>(ns);
    a.bytes += bytes;
  }

  void clear() {
    const std::lock_guard<std::mutex> lock(mutex_);
    acc_.clear();
  }

  ProfileResult snapshot() {
    ProfileResult r;
    const std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [key, a] : acc_) {
      const auto& [dev, op] = key;
      ProfileRow row;
      row.device = device_string(dev);
      row.op = std::string(op_name(op));
      row.calls = a.calls;
      row.total_ms = static_cast<double>(a.ns) / 1e6;
      row.mean_us = a.calls ? static_cast<double>(a.ns) / 1e3 / static_cast<double>(a.calls) : 0.0;
      row.bytes = a.bytes;
      r.rows.push_back(std::move(row));
      if (r.clocks.empty() || r.clocks.back().device != r.rows.back().device)
        r.clocks.push_back({r.rows.back().device, std::string(dev.type_id == kCpuDeviceType ? kHostClock : kSyncedClock), {}, false});
    }
    // The devices' memory as of now (a device-level entry: no hook, no op recorded).
    for (ProfileClock& c : r.clocks) {
      try {
        c.memory = memory_stats(parse_device(c.device));
        // All zero: the device keeps no account (the cpu), not an empty pool.
        c.has_memory = c.memory.bytes_reserved != 0 || c.memory.peak_bytes_in_use != 0;
      } catch (const std::exception&) {  // a lost device: the table goes without its memory line
      }
    }
    // acc_ is ordered by device, so the rows are grouped; sort each group by total time.
    auto first = r.rows.begin();
    while (first != r.rows.end()) {
      auto last = std::find_if(first, r.rows.end(), [&](const ProfileRow& x) { return x.device != first->device; });
      std::stable_sort(first, last, [](const ProfileRow& x, const ProfileRow& y) { return x.total_ms > y.total_ms; });
      first = last;
    }
    return r;
  }

 private:
  struct Acc {
    std::uint64_t calls = 0, ns = 0, bytes = 0;
  };
  std::mutex mutex_;
  std::map<std::pair<DeviceId, OpCode>, Acc> acc_;
};

struct State {
  Profiler profiler;
  std::mutex mutex;  // start/stop
  bool active = false;
};
State& state() {
  static State* s = new State();  // never destroyed: ops may run during static destruction
  return *s;
}

std::string human_bytes(std::uint64_t b) {
  const double v = static_cast<double>(b);
  if (b < 1024) return fmt::format("{} B", b);
  if (b < 1024 * 1024) return fmt::format("{:.1f} KiB", v / 1024);
  if (b < 1024ull * 1024 * 1024) return fmt::format("{:.1f} MiB", v / (1024.0 * 1024));
  return fmt::format("{:.2f} GiB", v / (1024.0 * 1024 * 1024));
}

}  // namespace

void profiler_start() {
  State& s = state();
  const std::lock_guard<std::mutex> lock(s.mutex);
  s.profiler.clear();
  if (!s.active) add_global_hook(&s.profiler);
  s.active = true;
}

ProfileResult profiler_read() { return state().profiler.snapshot(); }

ProfileResult profiler_stop() {
  State& s = state();
  const std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.active) return {};
  remove_global_hook(&s.profiler);
  s.active = false;
  return s.profiler.snapshot();
}

bool profiler_active() {
  State& s = state();
  const std::lock_guard<std::mutex> lock(s.mutex);
  return s.active;
}

std::string format_profile(const ProfileResult& r) {
  std::string out;
  if (r.rows.empty()) return "tensor profile: no ops recorded\n";
  std::size_t w = 2;
  for (const ProfileRow& row : r.rows) w = std::max(w, row.op.size());
  for (const ProfileClock& c : r.clocks) {
    out += fmt::format("tensor profile: {} (clock: {})\n", c.device, c.clock);
    out += fmt::format("  {:<{}}  {:>9}  {:>12}  {:>11}  {:>11}\n", "op", w, "calls", "total ms", "mean us", "bytes out");
    for (const ProfileRow& row : r.rows) {
      if (row.device != c.device) continue;
      out += fmt::format("  {:<{}}  {:>9}  {:>12.3f}  {:>11.3f}  {:>11}\n", row.op, w, row.calls, row.total_ms, row.mean_us,
                         human_bytes(row.bytes));
    }
    if (c.has_memory)
      out += fmt::format("  memory: {} in use, {} reserved, {} peak in use\n", human_bytes(c.memory.bytes_in_use),
                         human_bytes(c.memory.bytes_reserved), human_bytes(c.memory.peak_bytes_in_use));
  }
  return out;
}

void start_env_profiler() {
  const char* env = std::getenv("TENSOR_PROFILE");
  if (!env || std::string_view(env) != "1") return;
  profiler_start();
  std::atexit([] {
    const ProfileResult r = profiler_read();
    std::fputs(format_profile(r).c_str(), stderr);
  });
}

}  // namespace tensor::dispatch
