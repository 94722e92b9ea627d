// Hook installation and the chain that runs the installed hooks around one op.
#include "dispatch/hooks.hpp"

#include <cxxabi.h>
#include <fmt/format.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <typeinfo>

namespace tensor::dispatch {
namespace hooks_detail {

std::atomic<std::uint32_t> g_installed{0};

namespace {

std::array<std::atomic<OpHook*>, kMaxHooks> g_global{};
std::mutex g_global_mutex;  // one add/remove at a time; readers load the slots

struct ThreadHooks {
  std::array<OpHook*, kMaxHooks> hooks{};
  std::size_t count = 0;
};
thread_local ThreadHooks t_hooks;

struct Chain {
  std::array<OpHook*, 2 * kMaxHooks> hooks{};
  std::size_t count = 0;
  OpNext body;
};
struct Frame {
  const Chain* chain;
  std::size_t index;
};

void step(const void* self, OpCall& call) {
  const auto* f = static_cast<const Frame*>(self);
  if (f->index == f->chain->count) {
    f->chain->body(call);
    return;
  }
  const Frame inner{f->chain, f->index + 1};
  f->chain->hooks[f->index]->around(call, OpNext(&step, &inner));
}

}  // namespace

void run_hooked(OpCall& call, OpNext body) {
  Chain chain{{}, 0, body};
  for (const auto& slot : g_global)
    if (OpHook* h = slot.load(std::memory_order_acquire)) chain.hooks[chain.count++] = h;
  for (std::size_t i = 0; i < t_hooks.count; ++i) chain.hooks[chain.count++] = t_hooks.hooks[i];
  const Frame first{&chain, 0};
  step(&first, call);
}

std::string fmt_hook_error(OpCode op) {
  return fmt::format("[{}] a hook skipped the op without producing its output; expected every output set; got none",
                     op_name(op));
}

void rethrow_backend_exception(OpCode op, DeviceId device, const std::exception& e) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(abi::__cxa_demangle(typeid(e).name(), nullptr, nullptr, &status), std::free);
  const std::string type = status == 0 && name ? name.get() : typeid(e).name();
  if (dynamic_cast<const std::bad_alloc*>(&e))
    throw ExecutionError(fmt::format("[{}] out of memory on {}; expected the backend's allocations to succeed; got {}",
                                     op_name(op), device_string(device), type));
  throw ExecutionError(fmt::format("[{}] the backend failed on {}; expected success or a tensor::Error; got {}: {}",
                                   op_name(op), device_string(device), type, e.what()));
}

}  // namespace hooks_detail

void add_global_hook(OpHook* hook) {
  const std::lock_guard<std::mutex> lock(hooks_detail::g_global_mutex);
  for (auto& slot : hooks_detail::g_global) {
    if (slot.load(std::memory_order_relaxed) == nullptr) {
      slot.store(hook, std::memory_order_release);
      hooks_detail::g_installed.fetch_add(1, std::memory_order_relaxed);
      return;
    }
  }
  throw Error(fmt::format("[add_global_hook] too many global hooks; expected at most {}; got one more", kMaxHooks));
}

void remove_global_hook(OpHook* hook) {
  const std::lock_guard<std::mutex> lock(hooks_detail::g_global_mutex);
  for (auto& slot : hooks_detail::g_global) {
    if (slot.load(std::memory_order_relaxed) == hook) {
      slot.store(nullptr, std::memory_order_release);
      hooks_detail::g_installed.fetch_sub(1, std::memory_order_relaxed);
      return;
    }
  }
}

void add_thread_hook(OpHook* hook) {
  auto& t = hooks_detail::t_hooks;
  if (t.count == kMaxHooks)
    throw Error(fmt::format("[add_thread_hook] too many thread hooks; expected at most {}; got one more", kMaxHooks));
  t.hooks[t.count++] = hook;
  hooks_detail::g_installed.fetch_add(1, std::memory_order_relaxed);
}

void remove_thread_hook(OpHook* hook) {
  auto& t = hooks_detail::t_hooks;
  for (std::size_t i = 0; i < t.count; ++i) {
    if (t.hooks[i] != hook) continue;
    for (std::size_t j = i + 1; j < t.count; ++j) t.hooks[j - 1] = t.hooks[j];
    --t.count;
    hooks_detail::g_installed.fetch_sub(1, std::memory_order_relaxed);
    return;
  }
}

}  // namespace tensor::dispatch
