// Shader modules, the pipeline layout, lazily created pipelines keyed by every
// specialization constant in full, and the on-disk VkPipelineCache.

// Vulkan structs are initialised as `VkFoo info{VK_STRUCTURE_TYPE_FOO}` with the
// remaining members zeroed by the language; that is the intended idiom here.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include "backends/vulkan/runtime/internal.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "backends/vulkan/shaders/vk_codes.h"
#include "lib/core/current_op.hpp"
#include "tensor/error.hpp"

namespace tensor::vulkan {

void throw_too_many_spec_constants(std::size_t count) {
  throw ExecutionError(fmt::format("[{}] vulkan pipeline key; expected at most {} specialization constants; got {}",
                                   core::current_op_name(), PipelineKey::kMaxSpec, count));
}

namespace {
// The key keeps every bit of a constant: op codes 1 and 257 (equal in their low 8
// bits, which the key once packed alone) are different pipelines.
constexpr std::uint32_t kCode1[] = {1, DT_F32}, kCode257[] = {257, DT_F32};
static_assert(!(pipeline_key(ShaderFamily::Elementwise, 0, 0, kCode1, 2) ==
                pipeline_key(ShaderFamily::Elementwise, 0, 0, kCode257, 2)));
static_assert(!(pipeline_key(ShaderFamily::Elementwise, 0, 0, kCode1, 1) ==
                pipeline_key(ShaderFamily::Elementwise, 0, 0, kCode1, 2)));
static_assert(pipeline_key(ShaderFamily::Reduce, 1, 0, kCode257, 2) == pipeline_key(ShaderFamily::Reduce, 1, 0, kCode257, 2));
}  // namespace

std::string Context::cache_path() const {
  std::string dir;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) dir = std::string(x) + "/libtensor";
  else if (const char* h = std::getenv("HOME"); h && *h) dir = std::string(h) + "/.cache/libtensor";
  else return {};
  std::string uuid;
  for (std::uint8_t b : dev_.props.pipelineCacheUUID) uuid += fmt::format("{:02x}", b);
  return fmt::format("{}/vk-pipelines-{}-{:x}-{:x}-{:x}.bin", dir, uuid, dev_.props.vendorID, dev_.props.deviceID,
                     dev_.props.driverVersion);
}

void Context::init_pipelines(bool coop) {
  // One set layout for every family: binding 0 = parameters, 1..4 = tensors.
  VkDescriptorSetLayoutBinding binds[kBindings];
  for (std::uint32_t i = 0; i < kBindings; ++i)
    binds[i] = {i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
  VkDescriptorSetLayoutCreateInfo li{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  li.bindingCount = kBindings;
  li.pBindings = binds;
  check_vk(vkCreateDescriptorSetLayout(dev_.device, &li, nullptr, &pipes_.set_layout), "vkCreateDescriptorSetLayout");
  VkPipelineLayoutCreateInfo pli{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  pli.setLayoutCount = 1;
  pli.pSetLayouts = &pipes_.set_layout;
  check_vk(vkCreatePipelineLayout(dev_.device, &pli, nullptr, &pipes_.layout), "vkCreatePipelineLayout");

  for (int i = 0; i < static_cast<int>(ShaderFamily::Count); ++i) {
    // The optional families declare Float16 / StorageBuffer16BitAccess /
    // CooperativeMatrixNV: their modules exist only where those are enabled.
    if (i == static_cast<int>(ShaderFamily::ElementwiseF16) && !dev_.f16_ok) continue;
    if (i == static_cast<int>(ShaderFamily::MatmulCoop) && !coop) continue;
    const Spirv& spv = shader_spirv(static_cast<ShaderFamily>(i));
    VkShaderModuleCreateInfo si{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    si.codeSize = spv.bytes;
    si.pCode = spv.code;
    const std::string what = fmt::format("vkCreateShaderModule (shader {})", spv.name);
    check_vk(vkCreateShaderModule(dev_.device, &si, nullptr, &pipes_.modules[i][0]), what.c_str());
    if (dev_.wide_ok && spv.wide) {  // the 64-bit modules declare Int64/Float64: only where enabled
      si.codeSize = spv.wide_bytes;
      si.pCode = spv.wide;
      check_vk(vkCreateShaderModule(dev_.device, &si, nullptr, &pipes_.modules[i][1]), (what + " wide").c_str());
    }
    if (spv.subgroup && subgroup_decision(static_cast<ShaderFamily>(i)).size) {  // GroupNonUniformArithmetic
      si.codeSize = spv.subgroup_bytes;
      si.pCode = spv.subgroup;
      check_vk(vkCreateShaderModule(dev_.device, &si, nullptr, &pipes_.modules[i][2]), "vkCreateShaderModule");
    }
  }

  // Pipeline cache from disk, keyed by pipelineCacheUUID and driver version.
  std::vector<char> blob;
  const bool use_disk = !(std::getenv("TENSOR_VK_PIPELINE_CACHE") && std::strcmp(std::getenv("TENSOR_VK_PIPELINE_CACHE"), "0") == 0);
  const std::string path = use_disk ? cache_path() : std::string();
  if (!path.empty()) {
    std::ifstream in(path, std::ios::binary);
    if (in) blob.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  VkPipelineCacheCreateInfo ci{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  ci.initialDataSize = blob.size();
  ci.pInitialData = blob.empty() ? nullptr : blob.data();
  if (vkCreatePipelineCache(dev_.device, &ci, nullptr, &pipes_.cache) != VK_SUCCESS) {
    ci.initialDataSize = 0;  // a corrupt or foreign file: start empty
    ci.pInitialData = nullptr;
    check_vk(vkCreatePipelineCache(dev_.device, &ci, nullptr, &pipes_.cache), "vkCreatePipelineCache");
  } else {
    pipes_.loaded = !blob.empty();
  }
}

void Context::save_pipeline_cache() {
  if (!dev_.device || !pipes_.cache) return;
  const std::string path = cache_path();
  if (path.empty() || (std::getenv("TENSOR_VK_PIPELINE_CACHE") && std::strcmp(std::getenv("TENSOR_VK_PIPELINE_CACHE"), "0") == 0))
    return;
  std::size_t size = 0;
  if (vkGetPipelineCacheData(dev_.device, pipes_.cache, &size, nullptr) != VK_SUCCESS || size == 0) return;
  std::vector<char> data(size);
  if (vkGetPipelineCacheData(dev_.device, pipes_.cache, &size, data.data()) != VK_SUCCESS) return;
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  const std::string tmp = fmt::format("{}.{}.tmp", path, static_cast<long>(reinterpret_cast<std::uintptr_t>(this) & 0xFFFFFF));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return;
    out.write(data.data(), static_cast<std::streamsize>(size));
    if (!out) return;
  }
  std::filesystem::rename(tmp, path, ec);  // atomic: concurrent processes never see half a file
}

VkPipeline Context::pipeline(ShaderFamily family, const std::vector<std::uint32_t>& spec, bool wide) {
  if (wide && !dev_.wide_ok)
    throw DTypeError(fmt::format("[{}] a 64-bit dtype needs shaderInt64 and shaderFloat64; expected them on vulkan device {} "
                                 "({}); got a device without them", core::current_op_name(), dev_.index, name()));
  // The SUBGROUP variant (narrow only) runs with the family's chosen subgroup size.
  const std::uint32_t sg = wide ? 0 : subgroup_size(family);
  const int variant = wide ? 1 : sg ? 2 : 0;
  const PipelineKey key = pipeline_key(family, variant, sg, spec.data(), spec.size());
  std::lock_guard<std::mutex> lock(pipes_.mu);
  if (auto it = pipes_.pipelines.find(key); it != pipes_.pipelines.end()) return it->second;
  if (!pipes_.modules[static_cast<int>(family)][variant])
    throw ExecutionError(fmt::format("[{}] vulkan pipeline {}{}: its shader module is not available on device {} ({})",
                                     core::current_op_name(), shader_spirv(family).name,
                                     wide ? " (wide)" : sg ? " (subgroup)" : "", dev_.index, name()));
  std::vector<std::uint32_t> values = spec;
  std::vector<VkSpecializationMapEntry> entries(spec.size());
  for (std::uint32_t i = 0; i < spec.size(); ++i) entries[i] = {i, i * 4, 4};
  if (sg) {  // the shader's SG constant, a required size and full subgroups
    entries.push_back({SPEC_SUBGROUP, static_cast<std::uint32_t>(values.size() * 4), 4});
    values.push_back(sg);
  }
  VkSpecializationInfo si{static_cast<std::uint32_t>(entries.size()), entries.data(), values.size() * 4, values.data()};
  VkPipelineShaderStageRequiredSubgroupSizeCreateInfoEXT rs{
      VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO_EXT};
  rs.requiredSubgroupSize = sg;
  VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  ci.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  if (sg) {
    ci.stage.pNext = &rs;
    ci.stage.flags = VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT_EXT;
  }
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = pipes_.modules[static_cast<int>(family)][variant];
  ci.stage.pName = "main";
  ci.stage.pSpecializationInfo = &si;
  ci.layout = pipes_.layout;
  VkPipeline p;
  check_vk(vkCreateComputePipelines(dev_.device, pipes_.cache, 1, &ci, nullptr, &p),
           fmt::format("vkCreateComputePipelines (pipeline {}{})", shader_spirv(family).name, wide ? " wide" : "").c_str());
  if (pipes_.pipelines.empty()) {
    static bool registered = false;
    if (!registered) {
      registered = true;
      std::atexit([] {
        for (std::size_t i = 0; i < context_count(); ++i)
          if (Context* c = context(static_cast<std::uint16_t>(i))) c->save_pipeline_cache();
      });
    }
  }
  pipes_.pipelines.emplace(key, p);
  return p;
}

}  // namespace tensor::vulkan
