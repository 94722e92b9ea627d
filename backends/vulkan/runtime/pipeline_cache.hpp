// Pipelines: the shader families, the key that tells two pipelines apart, and the
// context's cache of them (PipelineCache): the layouts every family shares, the shader
// modules, the pipelines created so far and the on-disk VkPipelineCache. Created and
// looked up by runtime/pipeline.cpp.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "backends/vulkan/runtime/loader.hpp"

namespace tensor::vulkan {

// Shader families; each has a narrow and a WIDE (64-bit) SPIR-V module. Rows holds
// the one-workgroup-per-row kernels (softmax, log_softmax, sort, cross). The last
// two are optional and narrow only: ElementwiseF16 (f16 arithmetic on 16-bit
// storage, needs shaderFloat16 + storageBuffer16BitAccess) and MatmulCoop (the
// VK_NV_cooperative_matrix f16 matmul); their modules exist only where usable.
// Quant (quant.comp: quantize, dequantize, q_matmul) is narrow only, on every device; so is
// ElementwiseProgram (elementwise.comp -DPROGRAM: a graph's fused elementwise runs).
enum class ShaderFamily : std::uint8_t { Elementwise, Reduce, Scan, Matmul, Index, Rows, ElementwiseF16, MatmulCoop, Module, Conv, Attention, Quant, ElementwiseProgram, Count };

[[noreturn]] void throw_too_many_spec_constants(std::size_t count);

// Which pipeline a dispatch needs: its shader family, module variant (0 narrow, 1
// WIDE, 2 SUBGROUP), required subgroup size and every specialization constant in
// full (32 bits each, and their count), so that two dispatches share a pipeline
// only when every value agrees: an op code or dtype code of any size cannot alias.
struct PipelineKey {
  static constexpr std::size_t kMaxSpec = 16;  // constants per pipeline (elementwise.comp PROGRAM: 16)
  std::array<std::uint32_t, kMaxSpec + 2> words{};
  friend constexpr bool operator==(const PipelineKey&, const PipelineKey&) = default;
};
struct PipelineKeyHash {
  std::size_t operator()(const PipelineKey& k) const noexcept {
    std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a over the words
    for (std::uint32_t w : k.words) h = (h ^ w) * 0x100000001b3ull;
    return static_cast<std::size_t>(h);
  }
};
// Throws ExecutionError when `spec` has more than kMaxSpec constants.
constexpr PipelineKey pipeline_key(ShaderFamily family, int variant, std::uint32_t subgroup, const std::uint32_t* spec,
                                   std::size_t count) {
  if (count > PipelineKey::kMaxSpec) throw_too_many_spec_constants(count);
  PipelineKey k;
  k.words[0] = static_cast<std::uint32_t>(family) | static_cast<std::uint32_t>(variant) << 8 |
               static_cast<std::uint32_t>(count) << 16;
  k.words[1] = subgroup;
  for (std::size_t i = 0; i < count; ++i) k.words[2 + i] = spec[i];
  return k;
}

// The context's pipelines (made by the device's init; pipelines on first use, never
// evicted). `pipelines` is guarded by `mu`.
struct PipelineCache {
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkPipelineCache cache = VK_NULL_HANDLE;
  bool loaded = false;  // the cache started from a file
  // Per family: narrow, WIDE and (reduce only) the narrow SUBGROUP variant.
  VkShaderModule modules[static_cast<int>(ShaderFamily::Count)][3]{};
  std::unordered_map<PipelineKey, VkPipeline, PipelineKeyHash> pipelines;  // see Context::pipeline
  std::mutex mu;
};

}  // namespace tensor::vulkan
