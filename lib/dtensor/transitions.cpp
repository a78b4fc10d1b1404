#include "dtensor/transitions.h"

#include <ATen/ATen.h>

#include <numeric>

#include "core/error.h"
#include "dtensor/custom_backward.h"

namespace vescale::detail {
namespace {

int64_t offset_of(const std::vector<int64_t>& sizes, int rank) {
  return std::accumulate(sizes.begin(), sizes.begin() + rank, int64_t{0});
}

at::Tensor slice_of(const at::Tensor& t, int64_t dim, const std::vector<int64_t>& sizes, int rank) {
  return t.narrow(dim, offset_of(sizes, rank), sizes[rank]).contiguous();
}

/// All-to-all that moves a tensor sharded on `from_dim` to sharded on `to_dim`.
at::Tensor all_to_all_reshard(const at::Tensor& local, const comm::Group& group, int64_t from_dim,
                              const std::vector<int64_t>& from_sizes, int64_t to_dim,
                              const std::vector<int64_t>& to_sizes) {
  const int n = group.size();
  const int me = group.rank();
  std::vector<at::Tensor> inputs;
  std::vector<std::vector<int64_t>> output_shapes;
  for (int r = 0; r < n; ++r) {
    inputs.push_back(slice_of(local, to_dim, to_sizes, r));
    std::vector<int64_t> shape = local.sizes().vec();
    shape[from_dim] = from_sizes[r];
    shape[to_dim] = to_sizes[me];
    output_shapes.push_back(shape);
  }
  return at::cat(group.all_to_all(inputs, output_shapes), from_dim);
}

}  // namespace

at::Tensor gather_shards(const at::Tensor& local, const comm::Group& group, int64_t dim,
                         std::vector<int64_t> sizes) {
  const int rank = group.rank();
  return with_custom_backward(
      local, [&](const at::Tensor& x) { return group.all_gather(x, dim, sizes).contiguous(); },
      [sizes, dim, rank](const at::Tensor& grad) { return slice_of(grad, dim, sizes, rank); },
      "GatherShardsBackward");
}

at::Tensor take_shard(const at::Tensor& local, const comm::Group& group, int64_t dim,
                      std::vector<int64_t> sizes) {
  return with_custom_backward(
      local, [&](const at::Tensor& x) { return slice_of(x, dim, sizes, group.rank()); },
      [group, sizes, dim](const at::Tensor& grad) {
        return group.all_gather(grad.contiguous(), dim, sizes).contiguous();
      },
      "TakeShardBackward");
}

at::Tensor reduce_partial(const at::Tensor& local, const comm::Group& group, comm::ReduceOp op) {
  const int n = group.size();
  // For max: which pieces hold the maximum (set by forward, read by backward).
  auto winners = std::make_shared<at::Tensor>();
  BackwardFn backward = [](const at::Tensor& grad) { return grad; };
  if (op == comm::ReduceOp::kAvg) {
    backward = [n](const at::Tensor& grad) { return grad / n; };
  } else if (op == comm::ReduceOp::kMax) {
    // The gradient goes to the pieces that hold the maximum, split evenly between ties across
    // ranks, as amax does on one device.
    backward = [group, winners](const at::Tensor& grad) {
      at::Tensor count = winners->clone();
      group.all_reduce(count, comm::ReduceOp::kSum);
      return grad * *winners / count;
    };
  }
  return with_custom_backward(
      local,
      [&](const at::Tensor& x) {
        at::Tensor reduced = x.contiguous().clone();
        group.all_reduce(reduced, op);
        if (op == comm::ReduceOp::kMax) *winners = x.eq(reduced).to(x.scalar_type());
        return reduced;
      },
      std::move(backward), "ReducePartialBackward");
}

at::Tensor reduce_scatter_partial(const at::Tensor& local, const comm::Group& group, int64_t dim,
                                  std::vector<int64_t> sizes, comm::ReduceOp op) {
  VS_CHECK(op != comm::ReduceOp::kMax, "[dtensor] P(max) -> S goes through R");
  const int n = group.size();
  return with_custom_backward(
      local,
      [&](const at::Tensor& x) { return group.reduce_scatter(x, dim, op, sizes).contiguous(); },
      [group, sizes, dim, op, n](const at::Tensor& grad) {
        at::Tensor full = group.all_gather(grad.contiguous(), dim, sizes).contiguous();
        return op == comm::ReduceOp::kAvg ? full / n : full;
      },
      "ReduceScatterPartialBackward");
}

at::Tensor reshard(const at::Tensor& local, const comm::Group& group, int64_t from_dim,
                   std::vector<int64_t> from_sizes, int64_t to_dim, std::vector<int64_t> to_sizes) {
  return with_custom_backward(
      local,
      [&](const at::Tensor& x) {
        return all_to_all_reshard(x, group, from_dim, from_sizes, to_dim, to_sizes);
      },
      [group, from_dim, from_sizes, to_dim, to_sizes](const at::Tensor& grad) {
        return all_to_all_reshard(grad.contiguous(), group, to_dim, to_sizes, from_dim, from_sizes);
      },
      "ReshardBackward");
}

at::Tensor make_partial(const at::Tensor& local, const comm::Group& group, comm::ReduceOp op) {
  // Backward: the gradient of each piece is the loss's derivative with respect to it; the
  // replicated input feeds one piece (sum: its derivative is the full gradient on every rank)
  // or all n equal pieces (avg, max: each derivative is the gradient over n).
  const int n = group.size();
  return with_custom_backward(
      local,
      [&](const at::Tensor& x) {
        if (op == comm::ReduceOp::kSum && group.rank() != 0) return at::zeros_like(x);
        return x.clone();
      },
      [op, n](const at::Tensor& grad) { return op == comm::ReduceOp::kSum ? grad : grad * n; },
      "MakePartialBackward");
}

at::Tensor sum_grad_over(const at::Tensor& local, const comm::Group& group) {
  if (group.size() == 1) return local;
  return with_custom_backward(
      local, [](const at::Tensor& x) { return x; },
      [group](const at::Tensor& grad) {
        at::Tensor sum = grad.contiguous().clone();
        group.all_reduce(sum, comm::ReduceOp::kSum);
        return sum;
      },
      "SumGradOverBackward");
}

at::Tensor gather_shards_reduce_grad(const at::Tensor& local, const comm::Group& group, int64_t dim,
                                     std::vector<int64_t> sizes) {
  return with_custom_backward(
      local, [&](const at::Tensor& x) { return group.all_gather(x, dim, sizes).contiguous(); },
      [group, sizes, dim](const at::Tensor& grad) {
        return group.reduce_scatter(grad.contiguous(), dim, comm::ReduceOp::kSum, sizes)
            .contiguous();
      },
      "GatherShardsReduceGradBackward");
}

at::Tensor scale_grad(const at::Tensor& local, double factor) {
  if (factor == 1.0) return local;
  return with_custom_backward(
      local, [](const at::Tensor& x) { return x; },
      [factor](const at::Tensor& grad) { return grad * factor; }, "ScaleGradBackward");
}

}  // namespace vescale::detail
