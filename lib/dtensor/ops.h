// DTensor ops: what models are written with. Each op has single-device semantics: its result,
// and its gradients, equal the single-device op on the full tensors. Placements of the result
// follow the op's sharding rule (sharding_rules.h); inputs are redistributed as the rule needs.
// Every op is *collective* over the mesh (all ranks call it with the same placements).
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "dtensor/dtensor.h"
#include "dtensor/random.h"

namespace vescale::ops {

/// x @ w^T + b, w [out, in] (torch.nn.functional.linear).
DTensor linear(const DTensor& x, const DTensor& w, const std::optional<DTensor>& b = std::nullopt);
/// linear(x, ws[i], bs[i]) for every i as one GEMM over the weights' rows side by side (NOTE
/// [Fused projections]): the weights share their placements and input size; `bs` is empty or one
/// bias per weight, sharing their placements too.
std::vector<DTensor> linear_group(const DTensor& x, const std::vector<const DTensor*>& ws,
                                  const std::vector<const DTensor*>& bs);
/// Matrix product with batch dims (torch.matmul for >= 2-D operands).
DTensor matmul(const DTensor& a, const DTensor& b);

DTensor add(const DTensor& a, const DTensor& b);
DTensor sub(const DTensor& a, const DTensor& b);
DTensor mul(const DTensor& a, const DTensor& b);
DTensor div(const DTensor& a, const DTensor& b);
DTensor scale(const DTensor& x, double factor);
DTensor add_scalar(const DTensor& x, double value);

/// The same values in another scalar type (placements unchanged).
DTensor to_dtype(const DTensor& x, at::ScalarType dtype);
/// Exact (erf) GELU.
DTensor gelu(const DTensor& x);
/// SiLU: x * sigmoid(x).
DTensor silu(const DTensor& x);
/// SwiGLU's product silu(gate) * up, by the kernel table's SwiGLU row (NOTE [Kernel table]):
/// ATen's two ops, or one CUDA kernel of ours where it is taken.
DTensor swiglu(const DTensor& gate, const DTensor& up);
/// Inverted dropout with a layout-free mask: the same elements drop under every layout. When x
/// is rows [row_offset, row_offset + x.size(0)) of a batch of `global_rows` rows (data parallel,
/// micro-batches), the mask is that slice of the whole batch's mask.
DTensor dropout(const DTensor& x, double p, const RngKey& key, bool training,
                int64_t row_offset = 0, int64_t global_rows = -1);
/// Layer norm over the last dim.
DTensor layer_norm(const DTensor& x, const DTensor& weight, const DTensor& bias, double eps);
/// RMS norm over the last dim: x / sqrt(mean(x^2) + eps) * weight, the normalisation in float32
/// for lower-precision x (Hugging Face's LlamaRMSNorm).
DTensor rms_norm(const DTensor& x, const DTensor& weight, double eps);
/// (add(x, delta), layer_norm(that sum)): a block's residual add and the norm after it, by one
/// op (the kernel table's residual add + norm row, NOTE [Kernel table]) where the norm moves
/// nothing after the add (every layout of the plan zoo), else by the two ops. Either way the
/// values, the placements and the communication are those of the two ops.
std::pair<DTensor, DTensor> add_layer_norm(const DTensor& x, const DTensor& delta,
                                           const DTensor& weight, const DTensor& bias, double eps);
/// (add(x, delta), rms_norm(that sum)), as add_layer_norm.
std::pair<DTensor, DTensor> add_rms_norm(const DTensor& x, const DTensor& delta,
                                         const DTensor& weight, double eps);
/// Rotary position embedding of q or k [B, H, T, D] in the rotate-half convention (Hugging
/// Face's Llama): position p's pair (i, i + D/2) turned by p * theta^(-2i/D). Positions count
/// from 0 over the whole sequence, also when T is sharded.
DTensor rotary(const DTensor& x, double theta);
/// Each of the H heads of x [B, H, T, D] repeated `times` times in place ([B, H * times, T, D]):
/// grouped-query attention's k and v for the query heads. Heads sharded over a mesh dim stay
/// sharded when H divides evenly, else they are gathered first.
DTensor repeat_heads(const DTensor& x, int64_t times);
DTensor softmax(const DTensor& x, int64_t dim);
/// Causal softmax attention on q, k, v [B, H, T, D], scaled by 1/sqrt(D), without dropout on the
/// attention probabilities; fused on CUDA where LibTorch has it (NOTE [Fast paths]).
DTensor causal_attention(const DTensor& q, const DTensor& k, const DTensor& v);
/// Rows of `weight` [V, C] at integer `ids`.
DTensor embedding(const DTensor& ids, const DTensor& weight);
/// Mean cross entropy of logits [N, V] against integer targets [N]. With the class dim sharded
/// (vocab-parallel) the full logits are never gathered: max, sum-exp and target-logit reductions
/// cross the mesh instead (O(N) bytes). Result: a scalar, Partial over mesh dims that shard rows.
/// `normalizer` > 0: a loss mask's (NOTE [Loss masks]): targets may be kIgnoreTarget, rows that
/// add nothing, and the sum is divided by `normalizer` instead of N.
DTensor cross_entropy(const DTensor& logits, const DTensor& targets, double normalizer = 0);
/// cross_entropy(linear(x, w), targets) over the first `classes` rows of w (the rest padding),
/// for x [N, C], w [V, C], targets [N], without the logits: rows in chunks, the gradients made
/// with the loss (NOTE [Fused LM loss]). Vocab-parallel when w is sharded on V (x Replicate),
/// rows when x is sharded on N (-> Partial). float32 for lower-precision x. `normalizer` as for
/// cross_entropy.
DTensor linear_cross_entropy(const DTensor& x, const DTensor& w, const DTensor& targets,
                             int64_t classes, double normalizer = 0);

DTensor reshape(const DTensor& x, std::vector<int64_t> shape);
DTensor transpose(const DTensor& x, int64_t d0, int64_t d1);
DTensor sum(const DTensor& x, std::vector<int64_t> dims, bool keepdim = false);
/// Mean over all elements: a scalar.
DTensor mean(const DTensor& x);

}  // namespace vescale::ops
