// The SPIR-V of every shader family, compiled by glslc at build time and embedded as C
// arrays (meson.build), narrow / WIDE / SUBGROUP variants (see runtime/internal.hpp).

// Vulkan structs are initialised as `VkFoo info{VK_STRUCTURE_TYPE_FOO}` with the
// remaining members zeroed by the language; that is the intended idiom here.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include "backends/vulkan/runtime/internal.hpp"

#include <iterator>

namespace tensor::vulkan {

namespace {


alignas(4) const std::uint32_t kElementwiseSpv[] =
#include "elementwise.comp.spv.inc"
    ;
alignas(4) const std::uint32_t kElementwiseWideSpv[] =
#include "elementwise.comp.wide.spv.inc"
    ;
alignas(4) const std::uint32_t kReduceSpv[] =
#include "reduce.comp.spv.inc"
    ;
alignas(4) const std::uint32_t kReduceWideSpv[] =
#include "reduce.comp.wide.spv.inc"
    ;
alignas(4) const std::uint32_t kReduceSubgroupSpv[] =
#include "reduce.comp.subgroup.spv.inc"
    ;
alignas(4) const std::uint32_t kScanSpv[] =
#include "scan.comp.spv.inc"
    ;
alignas(4) const std::uint32_t kScanWideSpv[] =
#include "scan.comp.wide.spv.inc"
    ;
alignas(4) const std::uint32_t kMatmulSpv[] =
#include "matmul.comp.spv.inc"
    ;
alignas(4) const std::uint32_t kMatmulWideSpv[] =
#include "matmul.comp.wide.spv.inc"
    ;
alignas(4) const std::uint32_t kIndexSpv[] =
#include "index.comp.spv.inc"
    ;
alignas(4) const std::uint32_t kIndexWideSpv[] =
#include "index.comp.wide.spv.inc"
    ;
alignas(4) const std::uint32_t kRowsSpv[] =
#include "rows.comp.spv.inc"
    ;
alignas(4) const std::uint32_t kRowsWideSpv[] =
#include "rows.comp.wide.spv.inc"
    ;
alignas(4) const std::uint32_t kRowsSubgroupSpv[] =
#include "rows.comp.subgroup.spv.inc"
    ;
alignas(4) const std::uint32_t kElementwiseF16Spv[] =
#include "ew_f16.comp.spv.inc"
    ;
alignas(4) const std::uint32_t kMatmulCoopSpv[] =
#include "matmul_coop.comp.spv.inc"
    ;
alignas(4) const std::uint32_t kModuleSpv[] =
#include "module.comp.spv.inc"
    ;
alignas(4) const std::uint32_t kModuleWideSpv[] =
#include "module.comp.wide.spv.inc"
    ;
alignas(4) const std::uint32_t kConvSpv[] =
#include "conv.comp.spv.inc"
    ;
alignas(4) const std::uint32_t kConvWideSpv[] =
#include "conv.comp.wide.spv.inc"
    ;
alignas(4) const std::uint32_t kAttentionSpv[] =
#include "attention.comp.spv.inc"
    ;
alignas(4) const std::uint32_t kAttentionWideSpv[] =
#include "attention.comp.wide.spv.inc"
    ;
alignas(4) const std::uint32_t kQuantSpv[] =
#include "quant.comp.spv.inc"
    ;
alignas(4) const std::uint32_t kElementwiseProgramSpv[] =
#include "elementwise.comp.program.spv.inc"
    ;

const Spirv kShaders[] = {
    {kElementwiseSpv, sizeof(kElementwiseSpv), kElementwiseWideSpv, sizeof(kElementwiseWideSpv), "elementwise"},
    {kReduceSpv, sizeof(kReduceSpv), kReduceWideSpv, sizeof(kReduceWideSpv), "reduce", kReduceSubgroupSpv,
     sizeof(kReduceSubgroupSpv)},
    {kScanSpv, sizeof(kScanSpv), kScanWideSpv, sizeof(kScanWideSpv), "scan"},
    {kMatmulSpv, sizeof(kMatmulSpv), kMatmulWideSpv, sizeof(kMatmulWideSpv), "matmul"},
    {kIndexSpv, sizeof(kIndexSpv), kIndexWideSpv, sizeof(kIndexWideSpv), "index"},
    {kRowsSpv, sizeof(kRowsSpv), kRowsWideSpv, sizeof(kRowsWideSpv), "rows", kRowsSubgroupSpv, sizeof(kRowsSubgroupSpv)},
    {kElementwiseF16Spv, sizeof(kElementwiseF16Spv), nullptr, 0, "elementwise_f16"},
    {kMatmulCoopSpv, sizeof(kMatmulCoopSpv), nullptr, 0, "matmul_coop"},
    {kModuleSpv, sizeof(kModuleSpv), kModuleWideSpv, sizeof(kModuleWideSpv), "module"},
    {kConvSpv, sizeof(kConvSpv), kConvWideSpv, sizeof(kConvWideSpv), "conv"},
    {kAttentionSpv, sizeof(kAttentionSpv), kAttentionWideSpv, sizeof(kAttentionWideSpv), "attention"},
    {kQuantSpv, sizeof(kQuantSpv), nullptr, 0, "quant"},
    {kElementwiseProgramSpv, sizeof(kElementwiseProgramSpv), nullptr, 0, "elementwise_program"},
};
static_assert(std::size(kShaders) == static_cast<std::size_t>(ShaderFamily::Count));

}  // namespace

const Spirv& shader_spirv(ShaderFamily family) { return kShaders[static_cast<int>(family)]; }

}  // namespace tensor::vulkan
