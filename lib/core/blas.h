// Batched matmuls straight through the process's CBLAS, for the many small matrices of blocked
// attention (NOTE [Direct BLAS bmm]).
#pragma once

#include <ATen/core/Tensor.h>

namespace vescale::blas {

/// alpha * a @ b for a [N, M, K] and b [N, K, P]: a fresh contiguous [N, M, P] tensor.
///
/// NOTE [Direct BLAS bmm]: LibTorch 1.13's CPU bmm reaches the BLAS one matrix at a time through
/// ATen calls of its own (a select, an as_strided and, for baddbmm, an addmm_ per matrix): about
/// 18,000 of them per gpt-tiny step at T = 128 and 150-300 ms of every 20 steps on one thread.
/// Here float32 matrices whose last two dims are row-major or transposed (one of their strides
/// is 1, as slices and transposes of contiguous tensors are) go to cblas_sgemm directly, one call
/// per matrix, with the same operands; the BLAS is found in the process with dlsym (LibTorch
/// links it). Anything else (another dtype, another layout, no CBLAS in the process, a tensor
/// that autograd would record) is at::bmm followed by the scale.
at::Tensor bmm(const at::Tensor& a, const at::Tensor& b, double alpha = 1.0);

/// Whether the process has cblas_sgemm (then float32 bmm above takes the direct path).
bool has_direct_sgemm();

}  // namespace vescale::blas
