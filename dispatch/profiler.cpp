// The op profiler: a global hook that times each op and sums calls, time and output
// bytes per (device, op). On the CPU the clock is the host's wall time. Off the CPU the
// device is synced before and after each op, so queued GPU work is counted where it
// is issued; where the device has a clock (DeviceClock, which the Vulkan backend
// registers: timestamp queries) the op's time is the device time of the work it submitted, with the host
// wall time beside it; otherwise the host wall time.
#include "dispatch/profiler.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "dispatch/backend.hpp"
#include "dispatch/hooks.hpp"

namespace tensor::dispatch {
namespace {

constexpr std::string_view kHostClock = "host wall time";
constexpr std::string_view kSyncedClock = "host wall time, device synced after each op";
constexpr std::string_view kDeviceClock = "device timestamp queries";

struct Clocks {
  std::mutex mutex;
  std::array<DeviceClock, Registry::kMaxTypes> by_type{};
};
Clocks& clocks() {
  static Clocks* c = new Clocks();  // never destroyed: ops may run during static destruction
  return *c;
}

std::uint64_t ns_since(std::chrono::steady_clock::time_point t0) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
}

class Profiler final : public OpHook {
 public:
  void around(OpCall& call, const OpNext& next) override {
    const DeviceId dev = call.device;
    if (dev.type_id == kCpuDeviceType) {
      const auto t0 = std::chrono::steady_clock::now();
      next(call);
      const std::uint64_t ns = ns_since(t0);
      record(call, ns, ns);
      return;
    }
    // Off the CPU an op only queues work: wait for what was queued before it (not its
    // work) and for its own after it, so its time lands on this op.
    const DeviceClock clock = device_clock(dev);
    sync(dev);
    const std::uint64_t d0 = clock.ns ? clock.ns(dev) : 0;
    const auto t0 = std::chrono::steady_clock::now();
    next(call);
    sync(dev);
    const std::uint64_t host = ns_since(t0);
    record(call, clock.ns ? clock.ns(dev) - d0 : host, host);
  }

  void clear() {
    const std::lock_guard<std::mutex> lock(mutex_);
    acc_.clear();
    named_.clear();
    clocks_.clear();
  }

  void record_named(DeviceId dev, std::string_view name, std::uint64_t ns, std::uint64_t bytes) {
    const std::lock_guard<std::mutex> lock(mutex_);
    Acc& a = named_[{dev, std::string(name)}];
    a.calls += 1;
    a.ns += ns;
    a.host_ns += ns;
    a.bytes += bytes;
  }

  // Turns the device clocks this profile turned on off again (at stop).
  void stop_device_clocks() {
    std::vector<DeviceId> on;
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      for (const auto& [dev, timed] : clocks_)
        if (timed) on.push_back(dev);
    }
    for (const DeviceId dev : on) {
      try {
        (void)device_clock_of(dev).set(dev, false);
      } catch (const std::exception&) {  // a lost device: nothing to turn off
      }
    }
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
      row.host_ms = static_cast<double>(a.host_ns) / 1e6;
      row.bytes = a.bytes;
      r.rows.push_back(std::move(row));
      if (r.clocks.empty() || r.clocks.back().device != r.rows.back().device) {
        const auto c = clocks_.find(dev);
        const bool timed = c != clocks_.end() && c->second;
        ProfileClock clock;
        clock.device = r.rows.back().device;
        clock.clock = std::string(dev.type_id == kCpuDeviceType ? kHostClock : timed ? kDeviceClock : kSyncedClock);
        clock.device_clock = timed;
        r.clocks.push_back(std::move(clock));
      }
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
    // Named rows (a graph replay: one row per replay, not per node) join their device's group.
    for (const auto& [key, a] : named_) {
      const auto& [dev, name] = key;
      ProfileRow row;
      row.device = device_string(dev);
      row.op = name;
      row.calls = a.calls;
      row.total_ms = static_cast<double>(a.ns) / 1e6;
      row.mean_us = a.calls ? static_cast<double>(a.ns) / 1e3 / static_cast<double>(a.calls) : 0.0;
      row.host_ms = static_cast<double>(a.host_ns) / 1e6;
      row.bytes = a.bytes;
      auto after = std::find_if(r.rows.rbegin(), r.rows.rend(), [&](const ProfileRow& x) { return x.device == row.device; });
      if (after == r.rows.rend()) {
        ProfileClock clock;
        clock.device = row.device;
        clock.clock = std::string(dev.type_id == kCpuDeviceType ? kHostClock : kSyncedClock);
        r.clocks.push_back(std::move(clock));
        r.rows.push_back(std::move(row));
      } else {
        r.rows.insert(after.base(), std::move(row));
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
    std::uint64_t calls = 0, ns = 0, host_ns = 0, bytes = 0;
  };

  // The clock `dev` times ops with (null members: the host's). The first op a profile
  // sees on a device turns its clock on (no hook, no op recorded).
  DeviceClock device_clock(DeviceId dev) {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      if (const auto it = clocks_.find(dev); it != clocks_.end()) return it->second ? device_clock_of(dev) : DeviceClock{};
    }
    const DeviceClock c = device_clock_of(dev);
    const bool timed = c.set && c.ns && c.set(dev, true);
    const std::lock_guard<std::mutex> lock(mutex_);
    clocks_[dev] = timed;
    return timed ? c : DeviceClock{};
  }

  void record(const OpCall& call, std::uint64_t ns, std::uint64_t host_ns) {
    std::uint64_t bytes = 0;
    for (const DispatchTensor& t : call.outputs)
      if (t.prim) bytes += t.shape().num_elements() * dtype_size(t.dtype());
    const std::lock_guard<std::mutex> lock(mutex_);
    Acc& a = acc_[{call.device, call.op}];
    a.calls += 1;
    a.ns += ns;
    a.host_ns += host_ns;
    a.bytes += bytes;
  }

  std::mutex mutex_;
  std::map<std::pair<DeviceId, OpCode>, Acc> acc_;
  std::map<std::pair<DeviceId, std::string>, Acc> named_;  // rows that are not one op (graph_replay)
  std::map<DeviceId, bool> clocks_;  // devices seen: whether their clock is the device's
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

void register_device_clock(std::uint16_t device_type, DeviceClock clock) {
  if (device_type >= Registry::kMaxTypes) return;
  Clocks& c = clocks();
  const std::lock_guard<std::mutex> lock(c.mutex);
  c.by_type[device_type] = clock;
}

DeviceClock device_clock_of(DeviceId device) {
  const std::uint16_t t = autodiff_inner(device).type_id;
  if (t >= Registry::kMaxTypes) return {};
  Clocks& c = clocks();
  const std::lock_guard<std::mutex> lock(c.mutex);
  return c.by_type[t];
}

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
  s.profiler.stop_device_clocks();
  return s.profiler.snapshot();
}

void profiler_record(DeviceId device, std::string_view name, std::uint64_t ns, std::uint64_t bytes) {
  State& s = state();
  {
    const std::lock_guard<std::mutex> lock(s.mutex);
    if (!s.active) return;
  }
  s.profiler.record_named(device, name, ns, bytes);
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
    // A device clock's block adds the host wall time of the same calls (host ms: from the
    // sync before the op to the sync after it).
    out += fmt::format("tensor profile: {} (clock: {})\n", c.device, c.clock);
    out += fmt::format("  {:<{}}  {:>9}  {:>12}  {:>11}", "op", w, "calls", "total ms", "mean us");
    if (c.device_clock) out += fmt::format("  {:>12}", "host ms");
    out += fmt::format("  {:>11}\n", "bytes out");
    for (const ProfileRow& row : r.rows) {
      if (row.device != c.device) continue;
      out += fmt::format("  {:<{}}  {:>9}  {:>12.3f}  {:>11.3f}", row.op, w, row.calls, row.total_ms, row.mean_us);
      if (c.device_clock) out += fmt::format("  {:>12.3f}", row.host_ms);
      out += fmt::format("  {:>11}\n", human_bytes(row.bytes));
    }
    // GradientSync's rows (lib/src/distributed/gradient_sync.cpp): the share of the
    // training steps spent waiting for the gradients' all_reduce.
    double wait_ms = -1, step_ms = -1;
    for (const ProfileRow& row : r.rows)
      if (row.device == c.device && row.op == "dist.wait") wait_ms = row.total_ms;
      else if (row.device == c.device && row.op == "dist.step") step_ms = row.total_ms;
    if (wait_ms >= 0 && step_ms > 0)
      out += fmt::format("  waiting for gradients: {:.1f} % of the steps (dist.wait / dist.step)\n", 100.0 * wait_ms / step_ms);
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
