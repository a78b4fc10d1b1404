// The sharding rules of the DTensor ops, in one table: for one mesh dim, given the placements of
// an op's inputs, the placements the inputs must have and the placement of the output.
// Rules are decided per mesh dim; an op with no rule for the given placements asks for
// Replicate inputs (and says so at debug level). Internal to dtensor/.
#pragma once

#include <functional>
#include <vector>

#include "dtensor/placement.h"

namespace vescale::detail {

struct DimStrategy {
  Placements inputs;  ///< one per op input, in order (absent optional inputs: anything)
  Placement output;
  bool fallback = false;  ///< no rule matched: everything Replicate
};

using DimRule = std::function<DimStrategy(const Placements& inputs)>;

/// How an elementwise op treats Partial inputs.
enum class PartialPolicy {
  kNone,      ///< not linear (gelu, x + scalar): Partial inputs become Replicate
  kAll,       ///< linear in every input (add, sub): all-Partial stays Partial
  kOneFirst,  ///< linear in one input (mul: any one; div: the first): P op R stays Partial
  kOneAny,
};

/// Elementwise ops with broadcasting: a shard of an output dim needs the same shard of every
/// input that has that dim unbroadcast, and Replicate of the others.
DimRule elementwise_rule(std::vector<std::vector<int64_t>> input_shapes,
                         std::vector<int64_t> output_shape, PartialPolicy policy);
/// linear(x[..., in], w[out, in], b[out]): column-parallel (w S(0): x R, b S(0), out S(-1)),
/// row-parallel (w S(1): x S(-1), b P, out P), batch/sequence sharding (w R, x S(d<last)).
DimRule linear_rule(int64_t x_ndim);
/// linear_group(x, w_1..w_n, b_1..b_n) (b absent: one null input): linear_rule's, each weight
/// (and bias) taking what it asks of w (and b).
DimRule linear_group_rule(int64_t x_ndim, size_t weights, bool bias);
/// matmul(a[..., m, k], b[..., k, n]): batch dims, m, n, or k (-> Partial).
DimRule matmul_rule(int64_t a_ndim, int64_t b_ndim);
/// A norm over the last dim (layer_norm: x, weight, bias; rms_norm: x, weight): any other dim
/// of x may be sharded; its `params` parameters Replicate.
DimRule norm_rule(int64_t x_ndim, size_t params);
/// Rotary embedding of x [B, H, T, D]: any shard but the rotated D; Partial passes (linear in x).
DimRule rotary_rule();
/// repeat_heads of x [B, H, T, D] on a mesh dim of `mesh_size`: shards pass, the head dim's only
/// when H splits evenly (so that local repeats are the global one's pieces); Partial passes.
DimRule repeat_heads_rule(int64_t heads, int64_t mesh_size);
/// softmax along `dim`: any other dim may be sharded.
DimRule softmax_rule(int64_t x_ndim, int64_t dim);
/// causal attention on q, k, v [B, H, T, D]: batch- or head-sharded.
DimRule attention_rule();
/// embedding(ids, w[V, C]): w S(0) (vocab) -> Partial; w S(1) -> S(-1); ids sharded with w R.
DimRule embedding_rule(int64_t ids_ndim);
/// cross_entropy(logits[N, V], targets[N]) summed over rows: rows sharded (logits S(0), targets
/// S(0) -> Partial), or classes (vocab-parallel: logits S(1), targets R -> Replicate, the logits
/// never gathered: NOTE [Vocab-parallel cross entropy]).
DimRule cross_entropy_rule();
/// linear_cross_entropy(x[N, C], w[V, C], targets[N]): vocab-parallel (w S(0): x R, targets R ->
/// Replicate), or rows (x S(0), w R, targets S(0) -> Partial).
DimRule linear_cross_entropy_rule();
/// moe_experts(x[N, C], probs[N, E], then w1, w3, w2 of each local expert: `inputs` in all):
/// rows sharded (x and probs S(0), the experts Replicate -> S(0)). Expert parallelism is not a
/// placement: each ep rank holds whole experts (NOTE [Expert parallelism]).
DimRule moe_experts_rule(int64_t inputs);
/// transpose of dims d0, d1.
DimRule transpose_rule(int64_t ndim, int64_t d0, int64_t d1);
/// sum over `dims` (keepdim or not): a shard of a reduced dim becomes Partial.
DimRule sum_rule(int64_t ndim, std::vector<int64_t> dims, bool keepdim);
/// reshape from `from` to `to`: shards follow a dim kept whole, or the outer dim of a split or
/// merge when the mesh size divides it evenly. `mesh_size` is the size of the mesh dim.
DimRule reshape_rule(std::vector<int64_t> from, std::vector<int64_t> to, int64_t mesh_size);

}  // namespace vescale::detail
