#include "optim/optimizer.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <cmath>
#include <map>

#include "core/error.h"

namespace vescale {

SGD::SGD(std::vector<std::pair<std::string, DTensor*>> params, SGDOptions options)
    : params_(std::move(params)), momentum_(params_.size()), options_(options) {}

at::Tensor& SGD::state(size_t index, const std::string& name) {
  VS_CHECK(name == "momentum_buffer", "[optim] SGD has no state '{}'", name);
  if (!momentum_[index].defined())
    momentum_[index] = at::zeros_like(params_[index].second->to_local().detach());
  return momentum_[index];
}

void SGD::step(double lr) {
  torch::autograd::AutoGradMode no_grad(false);
  ++steps_;
  for (size_t k = 0; k < params_.size(); ++k) {
    const at::Tensor& p = params_[k].second->to_local();
    if (!p.grad().defined()) continue;
    at::Tensor d = p.grad();
    if (options_.weight_decay != 0 && p.dim() >= 2) d = d + options_.weight_decay * p;
    if (!momentum_[k].defined()) {
      momentum_[k] = d.clone();
    } else {
      momentum_[k].mul_(options_.momentum).add_(d);
    }
    p.add_(momentum_[k], -lr);
  }
}

double lr_at(int64_t step, int64_t total, double peak, int64_t warmup, bool cosine,
             double min_ratio) {
  if (step < warmup) return peak * static_cast<double>(step + 1) / static_cast<double>(warmup);
  if (!cosine || total <= warmup) return peak;
  const double progress =
      std::min(1.0, static_cast<double>(step - warmup) / static_cast<double>(total - warmup));
  const double min_lr = peak * min_ratio;
  return min_lr + 0.5 * (peak - min_lr) * (1.0 + std::cos(M_PI * progress));
}

double global_grad_norm(const std::vector<DTensor*>& params, const DeviceMesh& mesh) {
  // Squares summed per set of sharding mesh dims: a piece sharded on dims D is summed over D
  // and counted once over the rest (where it is replicated).
  std::map<std::vector<int>, double> by_dims;
  for (DTensor* p : params) {
    const at::Tensor& g = p->to_local().grad();
    if (!g.defined()) continue;
    std::vector<int> dims;
    for (int i = 0; i < mesh.ndim(); ++i) {
      if (p->placements()[i].is_shard()) dims.push_back(i);
    }
    by_dims[dims] += g.to(at::kDouble).pow(2).sum().item<double>();
  }
  // Every rank must take part in the same collectives: ask every mesh dim that could shard.
  double total = 0;
  for (int mask = 0; mask < (1 << mesh.ndim()); ++mask) {
    std::vector<int> dims;
    for (int i = 0; i < mesh.ndim(); ++i) {
      if (mask & (1 << i)) dims.push_back(i);
    }
    at::Tensor sum = at::full({1}, by_dims.count(dims) ? by_dims[dims] : 0.0, at::kDouble);
    for (int i : dims)
      mesh.group(i).all_reduce(sum, comm::ReduceOp::kSum);
    total += sum.item<double>();
  }
  return std::sqrt(total);
}

double clip_grad_norm(const std::vector<DTensor*>& params, const DeviceMesh& mesh,
                      double max_norm) {
  const double norm = global_grad_norm(params, mesh);
  const double coef = max_norm / (norm + 1e-6);
  if (max_norm > 0 && coef < 1.0) {
    torch::autograd::AutoGradMode no_grad(false);
    for (DTensor* p : params) {
      if (p->to_local().grad().defined()) p->to_local().mutable_grad().mul_(coef);
    }
  }
  return norm;
}

}  // namespace vescale
