#include "parallel/grad_clip.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "optim/adjacent_runs.h"

namespace vescale {

namespace {

/// The sum of squares of `grads` as a 0-dim float64 tensor on `device`, with no host sync: one
/// foreach norm per list (each norm accumulates in at least float32; half types are widened to
/// float32 first), squared and summed in float64.
at::Tensor sum_of_squares(const std::vector<at::Tensor>& grads, const Device& device) {
  if (grads.empty()) return at::zeros({}, at::dtype(at::kDouble).device(device));
  std::vector<at::Tensor> wide;
  wide.reserve(grads.size());
  for (const at::Tensor& g : grads) {
    const bool full = g.scalar_type() == at::kFloat || g.scalar_type() == at::kDouble;
    wide.push_back(full ? g : g.to(at::kFloat));
  }
  std::vector<at::Tensor> norms = at::_foreach_norm(wide, 2);
  for (at::Tensor& n : norms)
    n = n.to(at::kDouble);
  return at::stack(norms).square().sum();
}

}  // namespace

at::Tensor global_grad_norm(const std::vector<GradPiece>& pieces, const DeviceMesh& mesh,
                            const std::vector<int>& reduce_dims) {
  // Squares summed per subset of reduce_dims (bit i: reduce_dims[i] splits the piece): a piece
  // split over dims D is summed over D and counted once over the rest.
  const size_t n = reduce_dims.size();
  std::vector<std::vector<at::Tensor>> by_subset(size_t{1} << n);
  for (const GradPiece& piece : pieces) {
    if (!piece.grad.defined() || !piece.counted) continue;
    size_t subset = 0;
    for (int d : piece.split_dims) {
      const auto it = std::find(reduce_dims.begin(), reduce_dims.end(), d);
      VS_CHECK(it != reduce_dims.end(),
               "[parallel] a gradient split over mesh dim {} of {}, "
               "which the norm does not reduce over",
               d, mesh.str());
      subset |= size_t{1} << (it - reduce_dims.begin());
    }
    by_subset[subset].push_back(piece.grad);
  }
  std::vector<at::Tensor> sums;
  for (const auto& grads : by_subset)
    sums.push_back(sum_of_squares(grads, mesh.device()));
  // One all-reduce per dim, of the subsets that contain it (the same list on every rank).
  for (size_t i = 0; i < n; ++i) {
    std::vector<size_t> members;
    for (size_t subset = 0; subset < sums.size(); ++subset) {
      if (subset & (size_t{1} << i)) members.push_back(subset);
    }
    std::vector<at::Tensor> values;
    for (size_t subset : members)
      values.push_back(sums[subset]);
    at::Tensor packed = at::stack(values);
    mesh.group(reduce_dims[i]).all_reduce(packed, comm::ReduceOp::kSum);
    for (size_t m = 0; m < members.size(); ++m)
      sums[members[m]] = packed[static_cast<int64_t>(m)];
  }
  return at::stack(sums).sum().sqrt();
}

at::Tensor clip_grad_norm(const std::vector<GradPiece>& pieces, const DeviceMesh& mesh,
                          const std::vector<int>& reduce_dims, double max_norm) {
  const at::Tensor norm = global_grad_norm(pieces, mesh, reduce_dims);
  if (max_norm <= 0) return norm;
  torch::autograd::AutoGradMode no_grad(false);
  // Scaling by exactly 1 when the norm is within bounds leaves the gradients as they are. The
  // factor is a float64 or float32 scalar tensor, as a host scalar would be for the kernel.
  const at::Tensor coef64 = (max_norm / (norm + 1e-6)).clamp_max(1.0);
  const at::Tensor coef32 = coef64.to(at::kFloat);
  // NOTE [Adjacent runs]: gradients in one flat buffer (the master weights') scale in one pass.
  const auto scale = [&](const at::Tensor& g) {
    g.mul_(g.scalar_type() == at::kDouble ? coef64 : coef32);
  };
  std::vector<at::Tensor> flat;
  for (const GradPiece& piece : pieces) {
    if (!piece.grad.defined()) continue;
    if (piece.grad.is_contiguous()) {
      flat.push_back(piece.grad.view({-1}));
    } else {
      scale(piece.grad);
    }
  }
  for (const at::Tensor& g : merge_adjacent(std::move(flat)))
    scale(g);
  return norm;
}

}  // namespace vescale
