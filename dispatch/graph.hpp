// Graph capture at the invoke hook (issue 28, first step). A Recorder is a thread hook
// installed for the length of one capture: it lets every op run as usual (the capture run's
// results are real), refuses what a replay could not repeat (GraphCaptureError), and
// appends one Node per top-level op: its OpCode, the op frozen with its resolved backend
// entry and arguments (GraphThunk, from forward.hpp), and its input and output slots by
// buffer identity. `stop` turns the recording into a Program, the device-level
// GraphProgram that graph_replay runs natively on the CPU (a loop over the nodes: no
// validation, no dispatch, no hooks); other devices replay by re-running the closure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "dispatch/dispatch.hpp"
#include "dispatch/hooks.hpp"

namespace tensor::dispatch::graph {

// What a slot is to the graph. Input: a tensor made before the capture and read by it (the
// user refreshes it in place with copy_from; pinned from its first read). Constant: made in
// the window by a creation op with no tensor input. Internal: made and consumed inside the
// window. Output: returned by the closure; every replay writes it into the same buffer.
enum class SlotKind : std::uint8_t { Input, Constant, Internal, Output };
std::string_view slot_kind_name(SlotKind k);

inline constexpr std::uint32_t kNoSlot = 0xffffffffu;

struct Slot {
  SlotKind kind = SlotKind::Internal;
  DispatchTensor pinned;            // Input: the tensor read; Output: the buffer replays write into
  std::size_t bytes = 0;            // of the value (shape x dtype)
  std::int64_t producer = -1;       // node index (-1: made before the capture)
  std::int64_t last_use = -1;       // last node that reads it (-1: none)
};

struct Node {
  OpCode op{};
  std::unique_ptr<GraphThunk> thunk;
  std::vector<std::uint32_t> in;    // kNoSlot: an absent optional tensor
  std::vector<std::uint32_t> out;
};

struct ProgramStats {
  std::size_t nodes = 0, arena_bytes = 0;
  std::size_t inputs = 0, constants = 0, internals = 0, outputs = 0;
  std::vector<std::pair<OpCode, std::size_t>> op_counts;  // by first appearance
};

// The recorded list. `native` is false (and `why` says why) when the list cannot replay
// the closure exactly; the caller then replays by re-running the closure.
class Program : public GraphProgram {
 public:
  Program() { run = &run_list; }
  DeviceId device{};
  std::vector<Node> nodes;
  std::vector<Slot> slots;
  bool native = true;
  std::string why;
  ProgramStats stats;

 private:
  static void run_list(GraphProgram& g);
  std::vector<DispatchTensor> values_;  // per-slot values during one replay (reused)
};

class Recorder final : public OpHook {
 public:
  explicit Recorder(DeviceId device);
  ~Recorder() override;
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  void around(OpCall& call, const OpNext& next) override;
  // Ends the recording: `outputs` are the closure's results (their buffers become the
  // Output slots' homes). The recorder is uninstalled.
  std::unique_ptr<Program> stop(const std::vector<DispatchTensor>& outputs);
  // Uninstalls without a program (the closure threw).
  void abandon() noexcept;

 private:
  void not_native(std::string why);
  std::uint32_t slot_of_input(const DispatchTensor& t);

  std::unique_ptr<Program> p_;
  std::unordered_map<const Primitive*, std::uint32_t> current_;  // buffer -> its latest slot
  int depth_ = 0;
  bool installed_ = false;
};

// The recorder capturing on this thread, or null.
Recorder* active();
// Throws GraphCaptureError "[graph_capture] <what> ..." when this thread is capturing.
void refuse(std::string_view what, std::string_view why);
// Runs the replay list of a native program (through the device's graph_replay row).
void replay(Program& p);

}  // namespace tensor::dispatch::graph
