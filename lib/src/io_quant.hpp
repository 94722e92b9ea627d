// Quantized tensors in .safetensors files: the split into codes + scales + a metadata string
// on save and the join on load (the convention is written out in io_quant.cpp).
#pragma once

#include <map>
#include <string>

#include "tensor/io.hpp"

namespace tensor::io::detail {

/// The suffix of a quantized tensor's scales entry, and the metadata key prefix of its scheme.
inline constexpr const char* kScalesSuffix = ".qscales";
inline constexpr const char* kSchemeKeyPrefix = "qscheme.";

/// True when any of `tensors` is QFloat.
bool has_quantized(const NamedTensors& tensors);
/// Replaces each QFloat tensor by its codes and its scales (in that order, where it stood) and
/// adds its scheme to `metadata`; FormatError when the metadata already holds that key.
void split_quantized(const char* op, const std::string& path, NamedTensors& tensors, std::map<std::string, std::string>& metadata);
/// Joins every tensor a "qscheme." metadata string names back into one QFloat tensor (where its
/// codes stood), drops its scales entry and the metadata string; FormatError naming the tensor
/// when the scheme, the codes or the scales disagree.
void join_quantized(const char* op, const std::string& path, SafetensorsFile& file);

}  // namespace tensor::io::detail
