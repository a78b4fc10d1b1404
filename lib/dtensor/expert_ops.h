// Mixture-of-experts pieces: routing each token to its top-k experts, the dropless SwiGLU experts
// as a DTensor op, the per-sequence auxiliary load-balancing loss, and a loss term attached to an
// activation's backward (so that a loss taken inside a layer trains under every schedule).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "dtensor/dtensor.h"
#include "dtensor/expert_dispatch.h"

namespace vescale {

/// Each row's top-k experts and their weights.
struct ExpertRoutes {
  at::Tensor experts;  ///< [N, k] int64: by descending probability, ties to the lower index
  at::Tensor weights;  ///< [N, k]: the chosen probabilities renormalised to sum to 1 per row
};

/// The top `k` experts of each row of router probabilities `probs` [N, E] (NOTE [Expert
/// routing]); the weights are differentiable in `probs`.
ExpertRoutes route_top_k(const at::Tensor& probs, int64_t k);

/// The auxiliary load-balancing loss of router probabilities `probs` [S, T, E] whose top-k
/// choices are `experts` [S, T, k]: E x sum_e f_e P_e per sequence, averaged over the S
/// sequences, f_e (no gradient) the share of the sequence's top-k slots routed to e and P_e the
/// mean probability of e over its tokens (NOTE [MoE auxiliary loss]). A scalar of probs' dtype.
/// `ring`: the cp ranks holding the other parts of the sequences (their counts are summed over
/// it; the result is this rank's share, cp times as large). *Collective* over `ring`.
at::Tensor moe_aux_loss(const at::Tensor& probs, const at::Tensor& experts,
                        const comm::Group* ring = nullptr);

/// `y` itself, whose backward also backpropagates `grad` (a number) from the scalar `loss`: a
/// loss term of a layer that reaches the parameters' gradients without reaching the loss tensor
/// the schedule backpropagates (every pipeline stage, under recompute too). Without grad mode, or
/// when `loss` needs no gradient, `y` as is.
at::Tensor attach_loss(const at::Tensor& y, const at::Tensor& loss, double grad);

/// A low-rank adapter's factors on one of an expert's weights (NOTE [LoRA]); null: none.
struct ExpertAdapterParams {
  const DTensor* a = nullptr;  ///< [r, in]
  const DTensor* b = nullptr;  ///< [out, r]
};

/// One expert's weights: w1 and w3 [I, C], w2 [C, I] (Hugging Face's Mixtral expert), and with
/// LoRA the adapters on them, their terms scaled by `lora_scaling`.
struct ExpertParams {
  const DTensor* w1;
  const DTensor* w3;
  const DTensor* w2;
  ExpertAdapterParams lora1{}, lora3{}, lora2{};
  double lora_scaling = 0;
};

namespace ops {

/// Dropless SwiGLU experts: row n of x [N, C] goes to each of its top-k experts e (route_top_k
/// of probs [N, E]) and comes back as the sum over them of weight x w2 (silu(w1 x) * w3 x);
/// every routed row is computed (no capacity, nothing dropped). `local` are the weights of the
/// experts this rank holds (`placement`): all of them, or under expert parallelism its block,
/// the rows of the others sent to their ranks (NOTE [Expert parallelism]); with LoRA, each
/// adapted alike. Rows may be sharded (each rank routes its own) with the experts Replicate.
/// *Collective* over placement.ep.
DTensor moe_experts(const DTensor& x, const DTensor& probs, const std::vector<ExpertParams>& local,
                    int64_t k, const ExpertPlacement& placement);

}  // namespace ops
}  // namespace vescale
