// The module ops' arguments in the one form they keep from the public call down to the
// kernels: one struct per module family, rank-generic (rank 1..3; the dims past the rank
// hold neutral values), so one family serves conv1d..conv3d and their transposes, pools
// 1-d to 3-d. Dispatch checks them once (the rules of nn_shape.hpp) before a backend sees
// them; backends trust them.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "tensor/nn_options.hpp"

namespace tensor::core {

// ConvArgs, PoolArgs and their builders from the per-rank options are tensor::nn's own
// (tensor/nn_options.hpp builds them in the public call, lib/src/nn.cpp passes them on).
using tensor::detail::adaptive_pool_args;
using tensor::detail::conv_args;
using tensor::detail::ConvArgs;
using tensor::detail::pool_args;
using tensor::detail::PoolArgs;

// A pool row's window rule (an op-table column).
enum class Window : std::uint8_t { None, Max, Avg, AdaptiveAvg };

struct InterpArgs {
  std::array<std::int64_t, 2> size{1, 1};
  tensor::nn::InterpolateOptions options;
};

// unfold4d / fold4d: kernel and options; output_size [H, W] for fold4d only.
struct FoldArgs {
  std::array<std::int64_t, 2> kernel{1, 1};
  std::array<std::int64_t, 2> output_size{1, 1};
  tensor::nn::UnfoldOptions options;
};

// The args of rank `rank` with the dims past it neutral (what a backend sees).
inline ConvArgs normalized(ConvArgs a, std::size_t rank) {
  a.rank = rank;
  for (std::size_t i = rank; i < 3; ++i) {
    a.stride[i] = 1;
    a.padding[i] = 0;
    a.dilation[i] = 1;
    a.padding_out[i] = 0;
  }
  return a;
}

// The args of rank `rank` with the dims past it neutral.
inline PoolArgs normalized(PoolArgs a, std::size_t rank) {
  a.rank = rank;
  for (std::size_t i = rank; i < 3; ++i) {
    a.kernel[i] = 1;
    a.stride[i] = 1;
    a.padding[i] = 0;
    a.dilation[i] = 1;
    a.output_size[i] = 1;
  }
  return a;
}

}  // namespace tensor::core
