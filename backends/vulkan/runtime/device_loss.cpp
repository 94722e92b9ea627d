// Device loss: VK_ERROR_DEVICE_LOST recorded once, every later use throws naming it,
// and what pending work holds is released so dropping tensors stays safe.

// Vulkan structs are initialised as `VkFoo info{VK_STRUCTURE_TYPE_FOO}` with the
// remaining members zeroed by the language; that is the intended idiom here.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include "backends/vulkan/runtime/internal.hpp"

#include <fmt/format.h>

#include "lib/core/current_op.hpp"
#include "tensor/error.hpp"

namespace tensor::vulkan {

void Context::note_lost(VkResult r, const char* where) {
  if (r != VK_ERROR_DEVICE_LOST) return;
  std::lock_guard<std::mutex> lock(lost_mu_);
  if (lost_.load()) return;
  lost_where_ = where;
  lost_.store(true, std::memory_order_release);
}

std::string Context::lost_message() const {
  std::lock_guard<std::mutex> lock(lost_mu_);
  return fmt::format("[{}] vulkan device {} ({}) lost; expected a working device; got VK_ERROR_DEVICE_LOST from {} "
                     "(its tensors can only be dropped now)", core::current_op_name(), dev_.index, name(), lost_where_);
}

void Context::throw_lost_locked() {
  // Nothing recorded or submitted will run any more: release what it holds, so that
  // dropping the tensors gives their memory back.
  if (stream_.current) recycle_locked(std::move(stream_.current));
  while (!stream_.in_flight.empty()) {
    std::unique_ptr<Batch> b = std::move(stream_.in_flight.front());
    stream_.in_flight.pop_front();
    recycle_locked(std::move(b));
  }
  throw ExecutionError(lost_message());
}

void Context::simulate_device_loss(const char* where) {
  ensure_init();
  std::lock_guard<std::mutex> lock(stream_.mu);
  retire_locked(true, stream_.next_ticket - 1);  // the real device must not run on freed buffers
  note_lost(VK_ERROR_DEVICE_LOST, where);
}

}  // namespace tensor::vulkan
