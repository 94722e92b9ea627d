// Elementwise fusion of a captured graph (runtime/graph.cpp). A run of consecutive fusable
// dispatches (GraphCmd::ew_op) over the same element count becomes one dispatch of
// elementwise.comp's PROGRAM variant: invocation i runs each dispatch's op on element i in
// order. That is the dispatches' own result only where no invocation reads or overwrites an
// element another invocation writes, so a run ends before a dispatch whose ranges would
// overlap a range written in the run (or whose written range overlaps one read in it) other
// than as exactly the same range: a chain through the same buffers, an in-place update, a
// one-element value read everywhere and never written, all fuse; a shifted view of a value
// written in the run does not. The buffers a run touches (at most four VkBuffers, the
// shader's slots) are bound once each over the bytes it uses.
//
// Only small element counts are fused. The program reads each instruction's op index, flags
// and slots at run time, and llvmpipe (lavapipe) runs every branch under a mask, so per
// element it costs more than a specialized kernel; the run's ops (OPK0..7) and its slot
// count (NSLOTS) are specialization constants to keep that small. 64 chained ops, fused
// against one dispatch each, on lavapipe: 1.57x faster at 4 elements, 2.8x at 16, 1.9x at
// 64, 1.4x at 128, 1.1x at 192, 0.9-1.1x at 256, 0.33-0.76x from 1,024 up. So a software
// device takes runs of at most 128 elements. A GPU runs uniform branches once per wave; its
// bound (4,096 elements, launch-latency-bound on any GPU) is not measured on one yet.
// TENSOR_VK_GRAPH_FUSION_MAX at capture overrides either.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backends/vulkan/runtime/context.hpp"

namespace tensor::vulkan {

inline constexpr std::size_t kMaxFused = 4096;  // instructions per program (lavapipe's loops stop at 65535)
inline constexpr std::uint32_t kProgWords = 8;   // per instruction (elementwise.comp, PROGRAM)
inline constexpr std::uint32_t kFusionSlots = 4;  // the program's buffer bindings 1..4 (kBindings - 1)
inline constexpr std::uint32_t kFusionOps = 8;    // distinct ops per run (the program's OPK0..OPK7)

struct FusedRun {
  std::size_t begin = 0, end = 0;  // rec.cmds[begin, end), at least two
  std::uint32_t n = 0, slots = 0;
  VkBuffer buf[kFusionSlots]{};
  VkDeviceSize lo[kFusionSlots]{}, hi[kFusionSlots]{};  // bytes used; bound from lo aligned down to `align`
  bool wrote[kFusionSlots]{};
  std::vector<std::uint32_t> ops;    // the op table: instruction words hold indices into it
  std::vector<std::uint32_t> words;  // the program (binding 0)
  VkDeviceSize prog_off = 0;         // graph_build's placement of it
};

// The fused runs of `cmds`, in order, of at most `max_elements` elements each (`align`:
// minStorageBufferOffsetAlignment; `max_range`: maxStorageBufferRange, which no slot's
// binding may pass).
std::vector<FusedRun> plan_fusion(const std::vector<GraphCmd>& cmds, VkDeviceSize align, VkDeviceSize max_range,
                                  std::uint32_t max_elements);

}  // namespace tensor::vulkan
