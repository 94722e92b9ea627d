// Autodiff: burn's AutodiffBackend as a device flag. `autodiff_device(inner)` registers
// (once per device type) a decorator backend whose primitives wrap the inner device's
// and carry a graph node; its entries run the inner backend's kernels and record, per
// differentiable op, the backward step (see reference/autodiff.md). The implementation is
// dispatch/autodiff/; each op's backward step is its row in dispatch/autodiff/rules/*.def.
// Ops the decorator does not implement are filled by install_defaults with compositions
// of its own entries, so they are differentiated by decomposition, as burn does.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <unordered_map>

#include "dispatch/dispatch.hpp"

namespace tensor::dispatch::ad {

// The autodiff device wrapping `inner` (registered on first use), one per checkpointing
// strategy. DeviceError for an autodiff device (autodiff of autodiff) or an unknown one.
DeviceId autodiff_device(DeviceId inner, CheckpointingStrategy strategy = CheckpointingStrategy::None);

// A Float tensor of an autodiff device that is part of a graph (require_grad, or
// computed from one).
bool is_tracked(const DispatchTensor& t);
// Unwraps a tensor of an autodiff device (any kind) to the inner device's tensor; the
// graph is not followed. Error for a tensor of another device.
DispatchTensor inner(DispatchTensor t);
// Wraps a tensor of a plain device as an untracked tensor of its autodiff device.
DispatchTensor from_inner(DispatchTensor t);

// Gradients by graph-node id (burn's Gradients container), of inner-device tensors.
struct GradStore {
  std::unordered_map<std::uint64_t, DispatchTensor> grads;
  std::uint64_t pass = 0;  // the backward() that made it (1, 2, ... per process; 0: made elsewhere)
};

// Distributed leaves (tensor::dist's gradient reducer, lib/src/distributed/): a leaf marked
// with a parameter id (set_distributed) reports its gradient as soon as backward has
// finished it, so its bucket's all_reduce can start while backward continues.
struct DistLeaf {
  std::uint64_t param;  // the mark
  std::uint64_t node;   // the leaf's graph node (its key in the GradStore)
};
// One backward pass's reports, made on the thread running backward().
class DistSession {
 public:
  virtual ~DistSession() = default;
  // The leaf marked `param` has its final gradient `grad` (an empty one: none reached it).
  virtual void ready(std::uint64_t param, const DispatchTensor& grad) = 0;
  // The pass ended: every reached leaf was reported (ok), or it threw (!ok).
  virtual void finish(bool ok) = 0;
};
// Called when a backward pass reaches marked leaves: `leaves` are all it will report,
// `pass` is its GradStore's pass number, `collectives` says the graph holds collectives
// (their backward runs on this thread). Null: nobody listens to this pass.
using DistBegin = std::unique_ptr<DistSession> (*)(std::span<const DistLeaf> leaves, std::uint64_t pass, bool collectives);
// Installs the process-wide listener (lib/src/distributed/ does, once).
void set_dist_listener(DistBegin begin);
// Marks a leaf (a tensor that requires grad) with `param` (0 removes the mark); Error for
// anything else. The mark is the leaf node's, so every copy of the tensor carries it.
void set_distributed(const DispatchTensor& t, std::uint64_t param);
// The mark of a leaf; 0 when unmarked or not a leaf.
std::uint64_t distributed_param(const DispatchTensor& t);
// Runs the backward pass from a one-element Float tensor of an autodiff device. Frees the
// graph's intermediate nodes; a second backward through them is an Error.
std::unique_ptr<GradStore> backward(const DispatchTensor& root);
// The graph-node id of a tracked tensor (nullopt when untracked).
std::optional<std::uint64_t> node_id(const DispatchTensor& t);

// How the autodiff device differentiates an op (tensorctl ops, tests).
enum class Coverage : std::uint8_t {
  NotDifferentiable,  // no Float output carries a gradient (comparisons, int ops, creation)
  Native,             // an explicit backward step
  Decomposed,         // the op's default composition, differentiated through its parts
  Missing,            // a tracked input is an Error
};
Coverage coverage(OpCode op);
std::string_view coverage_name(Coverage c);

}  // namespace tensor::dispatch::ad
