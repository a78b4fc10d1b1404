// NOTE [CUDA kernels]
// Kernels of our own, in CUDA C++ under lib/kernels/cuda/*.cu: the element-wise work that ATen
// runs as several kernels (each a pass over memory) done in one. CMake builds them where LibTorch
// has CUDA and finds nvcc (VESCALE_CUDA_KERNELS=AUTO; ON fails without nvcc, OFF leaves them
// out), for sm_80, sm_90 and (nvcc 12.8 on) sm_100 with PTX for newer GPUs, warnings as errors
// under VESCALE_WERROR (CI's wheel check compiles them with nvcc 13.0, as C++20). Elsewhere
// lib/kernels/no_cuda_kernels.cpp stands in: build_text() says why, and each function throws.
// Each kernel is a row of the kernel table (NOTE [Kernel table]) behind the build flag
// `cuda_kernels` (VESCALE_HAS_CUDA_KERNELS), and a CUDA row, so NOTE [GPU-verified] applies: none
// is taken before a GPU has run it against its explicit row, the CPU reference
// (tests/kernels/kernel_table_test's KernelTableOnCuda, and tests/kernels/cuda_kernels_test at
// large and odd shapes; gpu-check times each against its fallback). Their math is in float32
// whatever the tensors' type (bf16, float16 or float32; float64 stays with ATen, the reference).
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

namespace vescale::cuda_kernels {

/// For --version: "built by nvcc 12.4 for sm_80, sm_90, PTX compute_90" or why not.
std::string build_text();

/// silu(gate) * up, elementwise, in one pass: SwiGLU's product. `gate` and `up` alike (shape,
/// dtype: float32, bf16 or float16; one CUDA device).
at::Tensor swiglu_forward(const at::Tensor& gate, const at::Tensor& up);
/// Its gradients for the output's gradient `grad`, in one pass: (d gate, d up) =
/// (grad up silu'(gate), grad silu(gate)), silu'(g) = s (1 + g (1 - s)), s = sigmoid(g).
std::pair<at::Tensor, at::Tensor> swiglu_backward(const at::Tensor& grad, const at::Tensor& gate,
                                                  const at::Tensor& up);

/// Rotary embedding (rotate-half) of x [B, H, T, D] at `positions` [T] (int64) by the angles
/// positions x `inv_freq` [D / 2] (float32): out[..., i] = x_i cos - x_{i + D/2} sin and
/// out[..., i + D/2] = x_{i + D/2} cos + x_i sin, in one pass. `inverse`: the rotation back
/// (sin negated), which is the backward's. x float32, bf16 or float16 on one CUDA device.
at::Tensor rotary(const at::Tensor& x, const at::Tensor& positions, const at::Tensor& inv_freq,
                  bool inverse);

/// A residual add and the norm after it (kernels/add_norm.h): sum = x + delta and its rows
/// normalised over the last dim, LayerNorm ((sum - mean) / std w + b) or RMSNorm (sum / rms, cast
/// to the input's type, times w); mean and 1/std (1/rms) a row in float32, for the backward.
struct AddNorm {
  at::Tensor sum, normed, mean, rstd;
};
/// x and delta alike ([..., C], float32, bf16 or float16, one CUDA device), w [C] (and b [C]
/// for LayerNorm) of their type; a block a row, the statistics in float32.
AddNorm add_norm_forward(bool layer_norm, const at::Tensor& x, const at::Tensor& delta,
                         const at::Tensor& w, const at::Tensor& b, double eps);
struct AddNormGrads {
  at::Tensor d_x, d_delta, d_w, d_b;  ///< d_x and d_delta equal, in tensors of their own
};
/// The gradients of add_norm_forward's inputs for the sum's gradient `d_sum` (from the residual
/// stream; may be undefined) and the normed rows' `d_normed`: the norm's backward plus d_sum in
/// one pass a row; d_w (and d_b) summed over rows through per-block float32 partials.
AddNormGrads add_norm_backward(bool layer_norm, const at::Tensor& d_sum, const at::Tensor& d_normed,
                               const at::Tensor& sum, const at::Tensor& w, const at::Tensor& mean,
                               const at::Tensor& rstd);

/// A chunk of the LM loss over the whole vocabulary (NOTE [Fused LM loss]) in one kernel: for
/// logits [rows, columns] (float32, bf16 or float16) and targets [rows], the summed loss
/// sum_r log(sum_j exp(z_rj - max_r)) - (z_rt - max_r) as a float32 scalar and, with `grad`, the
/// logits' gradient (softmax - onehot) / n_global in the logits' type (undefined without). The
/// max, the sum and the softmax in float32.
std::pair<at::Tensor, at::Tensor> lm_loss(const at::Tensor& logits, const at::Tensor& targets,
                                          double n_global, bool grad);

/// Grouped GEMM (NOTE [Grouped experts]): rows x [M, K] in groups, group g's rows [ends[g - 1],
/// ends[g]) (ends int64 [G] on x's device, read there: no host read; ends[G - 1] = M; ends that
/// decrease or miss M are held within the rows: NOTE [Group ends on the device]), each times
/// its own weight w[g]: y rows = x rows w[g]^T for w[g] [N, K] (`transpose_w`), else x rows w[g]
/// for w[g] [K, N]. y [M, N]; x and the weights of one type (float32, bf16 or float16) and
/// device; float32 accumulation, tensor cores for bf16 and float16.
at::Tensor grouped_mm(const at::Tensor& x, const at::Tensor& ends, const std::vector<at::Tensor>& w,
                      bool transpose_w);
/// The grouped weights' gradients [G, N, K]: dw[g] = dy_g^T x_g over group g's rows (zeros for a
/// group without rows), dy [M, N], x [M, K], `ends` as grouped_mm's.
at::Tensor grouped_weight_grads(const at::Tensor& dy, const at::Tensor& x, const at::Tensor& ends);

}  // namespace vescale::cuda_kernels
