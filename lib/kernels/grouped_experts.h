// NOTE [Grouped experts]
// A mixture of experts' rows, ordered by expert, each through its expert's SwiGLU: w2 (silu(w1 h)
// * w3 h). The explicit row runs the experts one after another, three matmuls each, after one host
// read of the experts' token counts (the rows each expert takes): on a GPU that read waits for the
// router's kernels, and each expert's small matmuls run alone. The grouped row runs each of the
// three matmuls for every expert in one grouped GEMM whose groups' bounds (the counts' running
// sums) stay on the device (cuda_kernels::grouped_mm), and the weights' gradients in one more a
// matmul (cuda_kernels::grouped_weight_grads): no host read, six launches a layer's forward and
// backward whatever the number of experts. The kernel table picks (kExpertsPaths). Both rows give
// an expert without rows a zero gradient, so that grad sync and ZeRO see every parameter finish.
// The grouped row's composition (the autograd node over a GroupedGemm) runs on the CPU too, with
// the reference GEMMs (kReferenceGemm), so its gradients are tested there; only the kernels need a
// GPU. With LoRA on the experts (NOTE [LoRA]) each projection gains its adapter's term, (x A^T)
// B^T scaled, by two more matmuls an expert in the explicit row and two more grouped GEMMs a
// projection in the grouped row.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

namespace vescale {

/// A low-rank adapter on one projection of an expert (NOTE [LoRA]): the projection x W^T gains
/// scaling (x A^T) B^T, A [r, in] and B [out, r]. Undefined factors: no adapter.
struct ExpertAdapter {
  at::Tensor a, b;
  double scaling = 0;

  bool on() const { return a.defined(); }
};

/// One expert's SwiGLU weights: w1 and w3 [I, C], w2 [C, I]; with LoRA the adapters on them
/// (each expert of a layer adapted alike).
struct ExpertWeights {
  at::Tensor w1, w3, w2;
  ExpertAdapter lora1{}, lora3{}, lora2{};
};

/// The two GEMMs of a grouped matmul and its backward (cuda_kernels::grouped_mm's contracts).
struct GroupedGemm {
  /// y [M, N]: group g's rows of x [M, K] times w[g]^T (w[g] [N, K]) or times w[g] ([K, N]).
  at::Tensor (*mm)(const at::Tensor& x, const at::Tensor& ends, const std::vector<at::Tensor>& w,
                   bool transpose_w);
  /// [G, N, K]: dy_g^T x_g for each group g.
  at::Tensor (*weight_grads)(const at::Tensor& dy, const at::Tensor& x, const at::Tensor& ends);
};

/// ATen's matmuls a group at a time, after a host read of `ends`: the reference.
extern const GroupedGemm kReferenceGemm;
/// Our kernels (NOTE [CUDA kernels]).
extern const GroupedGemm kCudaGemm;

namespace local {

/// Rows `h` [M, C] ordered by expert, `counts[e]` (int64 [E], any device: one host read) rows for
/// the e-th of `experts` in turn, each through its expert. `grad_scale` scales the weights'
/// gradients only (the adapters' too). Every expert runs, on no rows too, and the result [M, C]
/// depends on `h` even when M is 0, so that the backward always runs.
at::Tensor run_experts(const at::Tensor& h, const at::Tensor& counts,
                       const std::vector<ExpertWeights>& experts, double grad_scale);

}  // namespace local

/// The same by three grouped matmuls of `gemm` (groups' ends: the counts' running sum, on h's
/// device) and SwiGLU's product by the kernel table; no host read where `gemm` makes none.
at::Tensor grouped_experts(const at::Tensor& h, const at::Tensor& counts,
                           const std::vector<ExpertWeights>& experts, double grad_scale,
                           const GroupedGemm& gemm);

/// grouped_experts with our kernels: the grouped row of kExpertsPaths.
at::Tensor cuda_grouped_experts(const at::Tensor& h, const at::Tensor& counts,
                                const std::vector<ExpertWeights>& experts, double grad_scale);

}  // namespace vescale
