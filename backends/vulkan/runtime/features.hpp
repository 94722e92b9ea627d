// Optional fast paths of the Vulkan backend and the pure decisions that gate them, kept
// apart from the device code so tests can feed them synthetic device facts:
//  * native f16 arithmetic for the f16 elementwise kernels (shaderFloat16 + 16-bit
//    storage; TENSOR_VK_DISABLE_F16ARITH=1 keeps the f32-compute path);
//  * the cooperative-matrix f16 matmul. Debian 12's glslc (glslang 11.13) cannot
//    compile GL_KHR_cooperative_matrix, so the shader uses GL_NV_cooperative_matrix
//    and the device must offer VK_NV_cooperative_matrix (NVIDIA drivers do). It runs
//    only on allow-listed vendors whose property query lists the tile used here
//    (16x16x16, A/B f16, C/D f32, subgroup scope) with 32-wide subgroups, unless
//    TENSOR_VK_DISABLE_COOPMAT=1; the first use runs a self-test against the tiled
//    path and disables the path (with the reason) on a mismatch;
//  * subgroup arithmetic in the reduction shaders, with the subgroup size chosen per
//    pipeline (TENSOR_VK_DISABLE_SUBGROUP=1 keeps the shared-memory trees).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tensor::vulkan {

// The cooperative-matrix tile the coopmat shader uses.
constexpr std::uint32_t kCoopTile = 16;
constexpr std::uint32_t kCoopSubgroup = 32;

// One entry of vkGetPhysicalDeviceCooperativeMatrixPropertiesNV, with the component
// types as VkComponentTypeNV values and the scope as a VkScopeNV value.
struct CoopShape {
  std::uint32_t m = 0, n = 0, k = 0;
  int a = 0, b = 0, c = 0, d = 0;
  int scope = 0;
};

struct CoopFacts {
  std::uint32_t vendor_id = 0;
  bool extension = false;      // VK_NV_cooperative_matrix offered by the device
  bool feature = false;        // VkPhysicalDeviceCooperativeMatrixFeaturesNV::cooperativeMatrix
  bool f16_storage = false;    // shaderFloat16 + storageBuffer16BitAccess (the shader needs both)
  bool memory_model = false;   // VK_KHR_vulkan_memory_model + vulkanMemoryModel (glslang emits the
                               // Vulkan memory model for every cooperative-matrix shader)
  std::uint32_t subgroup_size = 0;
  bool disabled = false;       // TENSOR_VK_DISABLE_COOPMAT=1
  std::vector<CoopShape> shapes;
};

struct CoopDecision {
  bool usable = false;  // may run (still subject to the first-use self-test)
  std::string reason;   // why not, or what is used
};

// Vendors whose drivers are known to implement VK_NV_cooperative_matrix correctly
// (NVIDIA, 0x10DE).
bool coopmat_vendor_allowed(std::uint32_t vendor_id);
// Whether `shapes` has the 16x16x16 f16 x f16 + f32 subgroup tile.
bool coopmat_has_tile(const std::vector<CoopShape>& shapes);
CoopDecision decide_coopmat(const CoopFacts& f);

// What the device says about subgroups (VkPhysicalDeviceSubgroupProperties and
// VK_EXT_subgroup_size_control's properties and features).
struct SubgroupFacts {
  std::uint32_t size = 0;             // subgroupSize
  bool compute = false;               // supportedStages has COMPUTE
  bool arithmetic = false;            // supportedOperations has ARITHMETIC
  bool size_control_ext = false;      // VK_EXT_subgroup_size_control offered
  bool size_control = false;          // subgroupSizeControl
  bool full_subgroups = false;        // computeFullSubgroups
  std::uint32_t min_size = 0, max_size = 0;
  bool required_compute = false;      // requiredSubgroupSizeStages has COMPUTE
  std::uint32_t max_workgroup_subgroups = 0;
  bool disabled = false;              // TENSOR_VK_DISABLE_SUBGROUP=1
};

struct SubgroupDecision {
  std::uint32_t size = 0;  // the required subgroup size of the pipeline; 0: shared-memory path
  std::string reason;      // what is used, or why not
};

// The subgroup size for a pipeline of `workgroup` invocations (a power of two) that
// relies on full subgroups: the largest power of two within [min, max] that divides
// the workgroup and fits maxComputeWorkgroupSubgroups; it is set with a required-size
// create info plus REQUIRE_FULL_SUBGROUPS, so the device must offer both controls for
// compute.
SubgroupDecision decide_subgroup(const SubgroupFacts& f, std::uint32_t workgroup);

// Whether the environment variable is set to something other than "" or "0".
bool env_flag(const char* name);

}  // namespace tensor::vulkan
