// tensorctl bench --only plugin (bench_plugin.cpp): per-op overhead through a backend plugin
// against the built-in cpu backend, in the same run.
#pragma once

#include <string>

namespace tensor_bench {
// 0 on success; 2 (usage) when `device` (or, empty, the first plugin device) is not a plugin's.
int run_plugin(const std::string& device, bool quick);
}  // namespace tensor_bench
