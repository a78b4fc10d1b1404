// Batched matmuls straight through the process's CBLAS, for the many small matrices of blocked
// attention (NOTE [Direct BLAS matmul]).
#pragma once

#include <ATen/core/Tensor.h>

namespace vescale::blas {

/// out = alpha * a @ b + beta * out (beta 0 or 1) over the batch dims: a [..., M, K],
/// b [..., K, P] and out [..., M, P] with the same batch sizes, any strides. Records no autograd
/// history: for backward functions and forwards run under a custom autograd node.
///
/// NOTE [Direct BLAS matmul]: LibTorch 1.13's CPU bmm reaches the BLAS one matrix at a time
/// through ATen calls of its own (a select, an as_strided and, for baddbmm, an addmm_ per
/// matrix): about 18,000 of them per gpt-tiny step at T = 128. It also wants its output
/// contiguous, so writing into a strided slice costs a copy. Here float32 matrices whose last two
/// dims are row-major or transposed (one unit stride, as slices and transposes of contiguous
/// tensors are) go to cblas_sgemm directly, one call per matrix, reading and writing the tensors
/// where they are; the BLAS is found in the process with dlsym (LibTorch links it). Anything else
/// (another dtype, another layout, no CBLAS in the process) is at::matmul, then the scale and a
/// copy or an add into `out`.
void matmul_into(const at::Tensor& out, const at::Tensor& a, const at::Tensor& b, double alpha,
                 double beta);

/// Whether the process has cblas_sgemm (then float32 matmul_into takes the direct path).
bool has_direct_sgemm();

}  // namespace vescale::blas
