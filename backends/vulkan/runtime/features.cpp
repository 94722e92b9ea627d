// Gating decisions of the optional Vulkan fast paths (see runtime/features.hpp).
#include "backends/vulkan/runtime/features.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>

namespace tensor::vulkan {
namespace {
// VkComponentTypeNV / VkScopeNV values (vulkan_core.h), spelled out so this file needs
// no Vulkan header.
constexpr int kFloat16 = 0;  // VK_COMPONENT_TYPE_FLOAT16_NV
constexpr int kFloat32 = 1;  // VK_COMPONENT_TYPE_FLOAT32_NV
constexpr int kSubgroup = 3; // VK_SCOPE_SUBGROUP_NV
}  // namespace

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::strcmp(v, "0") != 0;
}

bool coopmat_vendor_allowed(std::uint32_t vendor_id) { return vendor_id == 0x10DE; }

bool coopmat_has_tile(const std::vector<CoopShape>& shapes) {
  for (const CoopShape& s : shapes)
    if (s.m == kCoopTile && s.n == kCoopTile && s.k == kCoopTile && s.a == kFloat16 && s.b == kFloat16 &&
        s.c == kFloat32 && s.d == kFloat32 && s.scope == kSubgroup)
      return true;
  return false;
}

CoopDecision decide_coopmat(const CoopFacts& f) {
  if (f.disabled) return {false, "disabled by TENSOR_VK_DISABLE_COOPMAT"};
  if (!f.extension) return {false, "the device does not offer VK_NV_cooperative_matrix"};
  if (!coopmat_vendor_allowed(f.vendor_id))
    return {false, fmt::format("vendor 0x{:x} is not on the cooperative-matrix allow-list", f.vendor_id)};
  if (!f.feature) return {false, "the cooperativeMatrix feature is not supported"};
  if (!f.f16_storage) return {false, "the device lacks shaderFloat16 or storageBuffer16BitAccess"};
  if (!f.memory_model) return {false, "the device lacks VK_KHR_vulkan_memory_model / vulkanMemoryModel"};
  if (f.subgroup_size != kCoopSubgroup)
    return {false, fmt::format("subgroup size {}; the shader needs {}", f.subgroup_size, kCoopSubgroup)};
  if (!coopmat_has_tile(f.shapes))
    return {false, fmt::format("no {0}x{0}x{0} f16 x f16 + f32 subgroup tile among the {1} reported shapes", kCoopTile,
                               f.shapes.size())};
  return {true, fmt::format("VK_NV_cooperative_matrix, {0}x{0}x{0} f16 x f16 + f32 tiles", kCoopTile)};
}

SubgroupDecision decide_subgroup(const SubgroupFacts& f, std::uint32_t workgroup) {
  if (f.disabled) return {0, "disabled by TENSOR_VK_DISABLE_SUBGROUP"};
  if (!f.compute || !f.arithmetic) return {0, "no subgroup arithmetic in compute shaders"};
  if (!f.size_control_ext) return {0, "the device does not offer VK_EXT_subgroup_size_control"};
  if (!f.size_control || !f.required_compute) return {0, "the subgroup size of compute pipelines cannot be set"};
  if (!f.full_subgroups) return {0, "computeFullSubgroups is not supported"};
  for (std::uint32_t s = workgroup; s >= 1; s >>= 1) {
    if (s < f.min_size || s > f.max_size || workgroup / s > f.max_workgroup_subgroups) continue;
    return {s, fmt::format("subgroup arithmetic, {} invocations per subgroup (device range {}..{})", s, f.min_size,
                           f.max_size)};
  }
  return {0, fmt::format("no subgroup size in {}..{} suits a {}-invocation workgroup (at most {} subgroups)",
                         f.min_size, f.max_size, workgroup, f.max_workgroup_subgroups)};
}

}  // namespace tensor::vulkan
