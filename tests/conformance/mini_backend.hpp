// "mini": a test backend that implements only the required entries of the op
// table, each by delegating to the CPU backend's own kernel, under its own device
// type. Every defaulted op on it therefore runs Dispatch's default composition,
// which the conformance suite compares with the CPU backend's native override.
#pragma once

#include <cstdint>

#include <tensor/device.hpp>

namespace tt::mini {

inline constexpr std::uint16_t kMiniDeviceType = 6;

// Registers the backend once (thread-safe) and returns its device.
tensor::Device device();

}  // namespace tt::mini
