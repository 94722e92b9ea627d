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
};
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
