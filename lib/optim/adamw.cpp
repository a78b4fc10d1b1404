#include "optim/adamw.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <cmath>
#include <map>
#include <string>
#include <tuple>
#include <utility>

#include "core/torch_features.h"

namespace vescale {
namespace {

/// The explicit update of a list of alike tensors, with foreach ops: the reference (float64), and
/// the path on the CPU and LibTorch 1.13. Per tensor it is exactly
///   p *= 1 - lr wd;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
///   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
/// so the values do not depend on how tensors are grouped.
void foreach_update(const fused::AdamWLists& l, const fused::AdamWHyper& h) {
  const double bias1 = 1.0 - std::pow(h.beta1, static_cast<double>(h.step));
  const double bias2 = 1.0 - std::pow(h.beta2, static_cast<double>(h.step));
  if (h.weight_decay != 0) at::_foreach_mul_(l.params, 1.0 - h.lr * h.weight_decay);
  at::_foreach_mul_(l.exp_avgs, h.beta1);
  at::_foreach_add_(l.exp_avgs, l.grads, 1.0 - h.beta1);
  at::_foreach_mul_(l.exp_avg_sqs, h.beta2);
  at::_foreach_addcmul_(l.exp_avg_sqs, l.grads, l.grads, 1.0 - h.beta2);
  std::vector<at::Tensor> denoms = at::_foreach_sqrt(l.exp_avg_sqs);
  at::_foreach_div_(denoms, std::sqrt(bias2));
  at::_foreach_add_(denoms, h.eps);
  at::_foreach_addcdiv_(l.params, l.exp_avgs, denoms, -h.lr / bias1);
}

/// Whether PyTorch's fused kernel can update these (NOTE [Fast paths]): CUDA, not float64, and
/// alike contiguous non-empty tensors.
bool fusable(const std::vector<at::Tensor>& tensors) {
  const at::Tensor& p = tensors.front();
  if (!use_fused_adamw(p.device(), p.scalar_type()) || p.numel() == 0) return false;
  for (const at::Tensor& t : tensors) {
    if (!t.is_contiguous() || t.scalar_type() != p.scalar_type() || t.device() != p.device())
      return false;
  }
  return true;
}

fused::AdamWHyper hyper(const AdamWOptions& o, double lr, bool decay, int64_t step) {
  return {lr, o.beta1, o.beta2, o.eps, decay ? o.weight_decay : 0.0, step};
}

}  // namespace

AdamW::AdamW(std::vector<ParamView> views, AdamWOptions options)
    : Optimizer(std::move(views)), options_(options) {}

void AdamW::step(double lr) {
  torch::autograd::AutoGradMode no_grad(false);
  ++steps_;
  // One launch per group of alike tensors: (weight decay on, dtype, device, fusable).
  using Group = std::tuple<bool, at::ScalarType, std::string, bool>;
  std::map<Group, fused::AdamWLists> groups;
  for (size_t k = 0; k < views_.size(); ++k) {
    const at::Tensor g = views_[k].grad();
    if (!g.defined()) continue;
    at::Tensor p = views_[k].value();
    at::Tensor& exp_avg = state(k, 0);
    at::Tensor& exp_avg_sq = state(k, 1);
    if (!exp_avg.defined()) exp_avg = at::zeros_like(p);
    if (!exp_avg_sq.defined()) exp_avg_sq = at::zeros_like(p);
    const bool decay = views_[k].weight_decay && options_.weight_decay != 0;
    const bool fuse = fusable({p, g, exp_avg, exp_avg_sq});
    fused::AdamWLists& lists = groups[{decay, p.scalar_type(), p.device().str(), fuse}];
    lists.params.push_back(p);
    lists.grads.push_back(g);
    lists.exp_avgs.push_back(exp_avg);
    lists.exp_avg_sqs.push_back(exp_avg_sq);
  }
  for (const auto& [group, lists] : groups) {
    const fused::AdamWHyper h = hyper(options_, lr, std::get<0>(group), steps_);
    if (std::get<3>(group)) {
      fused::adamw_step(lists, h);
    } else {
      foreach_update(lists, h);
    }
  }
}

}  // namespace vescale
