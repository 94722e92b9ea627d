// The command stream: what one dispatch binds (Binding), the recording state of one
// submission (Batch), and the context's queue of them (Stream): the batch being
// recorded, those submitted, the spares, tickets and timestamps. Recorded, submitted,
// retired and recycled by runtime/stream.cpp.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backends/vulkan/runtime/loader.hpp"
#include "backends/vulkan/runtime/memory.hpp"

namespace tensor::vulkan {

// One storage-buffer binding of a dispatch: a buffer and whether the dispatch writes it.
// `offset`/`range` (bytes, relative to the buffer; range 0 = to its end) bind a
// sub-range, so tensors beyond maxStorageBufferRange can be processed in pieces.
struct Binding {
  const Buffer* buffer = nullptr;
  bool write = false;
  VkDeviceSize offset = 0;
  VkDeviceSize range = 0;
};

// Submissions queued ahead of the device at most: a submit beyond this waits for the
// oldest one, so work queued without any read back holds bounded memory (the
// buffers the batches keep alive, their arenas and Vulkan objects).
inline constexpr std::size_t kMaxInFlight = 16;
// Retired batches kept for reuse; the others are destroyed.
inline constexpr std::size_t kMaxSpare = 4;

// Command recording state of one submission.
struct Batch {
  VkCommandPool pool = VK_NULL_HANDLE;
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  VkFence fence = VK_NULL_HANDLE;
  VkDescriptorPool descriptors = VK_NULL_HANDLE;
  VkQueryPool timestamps = VK_NULL_HANDLE;  // 2 queries: batch start and end (when timed)
  bool timed = false;              // this recording writes both timestamps
  BufRef params;                   // host-visible parameter arena
  VkDeviceSize params_used = 0;
  std::vector<BufRef> keep;        // buffers used by the recorded work
  BufRef errors;                   // host-visible flag words of index dispatches (2 per slot)
  std::vector<std::string> checks; // per error slot: the message prefix of its op
  // The recorded work in order, for carrying an index error from a flagged dispatch
  // to everything computed from its result: `count` entries of `keep` from `first`,
  // bit i of `writes` set where entry i is written; `slot` the error slot or -1.
  struct Step { std::uint32_t first, count, writes; std::int32_t slot; };
  std::vector<Step> steps;
  std::uint32_t dispatches = 0;
  std::uint64_t ticket = 0;
  // Regions written / read since the last barrier (buffer, offset, size).
  struct Region { VkBuffer buf; VkDeviceSize off, size; };
  std::vector<Region> written, read;
};

// What a graph capture recorded on this context (runtime/graph.cpp): every dispatch and
// buffer copy of the capture run, in order, with the buffers they touched (held) and
// their parameter words, so that graph_stop_capture can record them again into one
// reusable command buffer (GraphExec).
struct GraphCmd {
  VkPipeline pipe = VK_NULL_HANDLE;  // null: a buffer copy uses[0] -> uses[1] of `bytes`
  std::vector<std::uint32_t> params;
  // Dispatch: bindings 1.. in order (a null buffer: binding left to the parameter slot);
  // `off`/`len` are buffer-absolute, as the eager path binds them.
  struct Use { BufRef buf; VkDeviceSize off = 0, len = 0; bool write = false; };
  std::vector<Use> uses;
  std::uint32_t gx = 1, gy = 1, gz = 1;
  std::int32_t check = -1;  // index into GraphRecording::checks (an index dispatch), or -1
  VkDeviceSize bytes = 0;
  // A dense f32 elementwise dispatch that graph_build may fuse with its neighbours
  // (elementwise.comp with CONTIG 1 or 2 + m, an op of the PROGRAM variant): its op code,
  // whether b is the scalar s0, and bit 0 / 1 set where a / b is one element read by every
  // invocation (m). ew_op is -1 for every other command.
  std::int32_t ew_op = -1;
  bool ew_scalar = false;
  std::uint32_t ew_single = 0;
};
struct GraphRecording {
  std::thread::id thread;           // only this thread's work belongs to the graph
  std::vector<GraphCmd> cmds;
  std::vector<std::string> checks;  // per checked dispatch: its error message prefix
  std::vector<BufRef> staging;      // uploads made in the window, re-copied by each replay
  std::string why;                  // non-empty: something a command buffer cannot repeat
};

// The context's command stream; everything but the atomics is guarded by `mu`.
struct Stream {
  std::mutex mu;  // recording, submission
  std::unique_ptr<Batch> current;
  std::deque<std::unique_ptr<Batch>> in_flight;
  std::vector<std::unique_ptr<Batch>> spare;
  std::atomic<std::size_t> live_batches{0};  // created and not destroyed (recording, in flight, spare)
  std::uint64_t next_ticket = 1;
  std::uint64_t completed_ticket = 0;
  bool any_poison = false;  // a flagged index dispatch retired (then every batch's steps are walked)
  std::unique_ptr<GraphRecording> rec;  // a graph capture in progress (runtime/graph.cpp)
  std::atomic<bool> recording{false};    // rec is set (cheap test on the upload path)
  std::atomic<std::uint64_t> submits{0};  // vkQueueSubmit calls (batches and graph replays)
  std::atomic<bool> ts_on{false};
  std::atomic<std::uint64_t> device_ns{0};
};

}  // namespace tensor::vulkan
