// What every kernel of lib/kernels/cuda launches with (NOTE [CUDA kernels]): the block size, a
// grid for n elements walked by a grid-stride loop, and the element type of a tensor's dtype.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <cstdint>

namespace vescale::cuda_kernels {

inline constexpr int kThreads = 256;

/// Blocks for n items of kThreads each, at most 65,535 (the loops stride over the rest).
inline int blocks_for(int64_t n) {
  return static_cast<int>(std::min<int64_t>((n + kThreads - 1) / kThreads, 65535));
}

/// Calls `launch` with a value of the element type of `dtype`: float, c10::BFloat16 or c10::Half
/// (the callers have checked it is one of those).
template <typename Launch>
void by_dtype(at::ScalarType dtype, const Launch& launch) {
  switch (dtype) {
    case at::kFloat:
      launch(float{});
      break;
    case at::kBFloat16:
      launch(c10::BFloat16{});
      break;
    default:
      launch(c10::Half{});
      break;
  }
}

/// Whether our kernels take `dtype`.
inline bool takes(at::ScalarType dtype) {
  return dtype == at::kFloat || dtype == at::kBFloat16 || dtype == at::kHalf;
}

}  // namespace vescale::cuda_kernels
