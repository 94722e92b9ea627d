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
//    path and disables the path (with the reason) on a mismatch.
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

// Whether the environment variable is set to something other than "" or "0".
bool env_flag(const char* name);

}  // namespace tensor::vulkan
