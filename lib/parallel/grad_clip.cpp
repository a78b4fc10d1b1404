#include "parallel/grad_clip.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace vescale {

double global_grad_norm(const std::vector<GradPiece>& pieces, const DeviceMesh& mesh,
                        const std::vector<int>& reduce_dims) {
  // Squares summed per subset of reduce_dims (bit i: reduce_dims[i] splits the piece): a piece
  // split over dims D is summed over D and counted once over the rest.
  const size_t n = reduce_dims.size();
  std::vector<double> by_subset(size_t{1} << n, 0.0);
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
    by_subset[subset] += piece.grad.to(at::kDouble).pow(2).sum().item<double>();
  }
  // One all-reduce per dim, of the subsets that contain it (the same list on every rank).
  for (size_t i = 0; i < n; ++i) {
    std::vector<size_t> members;
    for (size_t subset = 0; subset < by_subset.size(); ++subset) {
      if (subset & (size_t{1} << i)) members.push_back(subset);
    }
    std::vector<double> values;
    for (size_t subset : members)
      values.push_back(by_subset[subset]);
    at::Tensor sums = at::tensor(values, at::kDouble).to(mesh.device());
    mesh.group(reduce_dims[i]).all_reduce(sums, comm::ReduceOp::kSum);
    const at::Tensor host = sums.cpu();
    for (size_t m = 0; m < members.size(); ++m)
      by_subset[members[m]] = host[static_cast<int64_t>(m)].item<double>();
  }
  double total = 0;
  for (double s : by_subset)
    total += s;
  return std::sqrt(total);
}

double clip_grad_norm(const std::vector<GradPiece>& pieces, const DeviceMesh& mesh,
                      const std::vector<int>& reduce_dims, double max_norm) {
  const double norm = global_grad_norm(pieces, mesh, reduce_dims);
  const double coef = max_norm / (norm + 1e-6);
  if (max_norm > 0 && coef < 1.0) {
    torch::autograd::AutoGradMode no_grad(false);
    for (const GradPiece& piece : pieces) {
      if (piece.grad.defined()) piece.grad.mul_(coef);
    }
  }
  return norm;
}

}  // namespace vescale
