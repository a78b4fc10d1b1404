// The differentiable one-mesh-dim moves that redistribute is made of. Each is a collective over
// one group (the mesh dim's), with its adjoint as backward (NOTE [Gradient placements]).
// Internal to dtensor/.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

#include "comm/group.h"

namespace vescale::detail {

/// S(dim) -> R: all-gather the pieces (extents `sizes`). Backward: this rank's slice.
at::Tensor gather_shards(const at::Tensor& local, const comm::Group& group, int64_t dim,
                         std::vector<int64_t> sizes);
/// R -> S(dim): this rank's piece (extents `sizes`). Backward: all-gather.
at::Tensor take_shard(const at::Tensor& local, const comm::Group& group, int64_t dim,
                      std::vector<int64_t> sizes);
/// P(op) -> R: all-reduce. Backward: the gradient (sum), over n (avg), or to the maxima (max).
at::Tensor reduce_partial(const at::Tensor& local, const comm::Group& group, comm::ReduceOp op);
/// P(sum|avg) -> S(dim): reduce-scatter. Backward: all-gather (over n for avg).
at::Tensor reduce_scatter_partial(const at::Tensor& local, const comm::Group& group, int64_t dim,
                                  std::vector<int64_t> sizes, comm::ReduceOp op);
/// S(from) -> S(to): all-to-all. Backward: the reverse all-to-all.
at::Tensor reshard(const at::Tensor& local, const comm::Group& group, int64_t from_dim,
                   std::vector<int64_t> from_sizes, int64_t to_dim, std::vector<int64_t> to_sizes);
/// R -> P(op): sum keeps the value on group rank 0 and zeros elsewhere; avg and max keep it
/// everywhere. Backward: the replicated gradient (n pieces' derivatives for avg and max).
at::Tensor make_partial(const at::Tensor& local, const comm::Group& group, comm::ReduceOp op);
/// Identity forward; all-reduces (sums) the gradient over `group` backward. For a Replicate
/// input used in sharded computation, whose local gradient is a partial sum.
at::Tensor sum_grad_over(const at::Tensor& local, const comm::Group& group);

/// S(dim) -> R whose gradient comes back as a partial sum: all-gather forward, reduce-scatter
/// backward (Megatron's sequence-parallel g/f pair).
at::Tensor gather_shards_reduce_grad(const at::Tensor& local, const comm::Group& group, int64_t dim,
                                     std::vector<int64_t> sizes);
/// Identity forward; multiplies the gradient by `factor` backward.
at::Tensor scale_grad(const at::Tensor& local, double factor);

}  // namespace vescale::detail
