#include "optim/adamw.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <cmath>
#include <map>
#include <utility>

#include "core/torch_features.h"

namespace vescale {
namespace {

/// The explicit update: the reference (float64), and the only path on the CPU and LibTorch 1.13.
void explicit_update(at::Tensor& p, const at::Tensor& g, at::Tensor& exp_avg,
                     at::Tensor& exp_avg_sq, const fused::AdamWHyper& h) {
  const double bias1 = 1.0 - std::pow(h.beta1, static_cast<double>(h.step));
  const double bias2 = 1.0 - std::pow(h.beta2, static_cast<double>(h.step));
  if (h.weight_decay != 0) p.mul_(1.0 - h.lr * h.weight_decay);
  exp_avg.mul_(h.beta1).add_(g, 1.0 - h.beta1);
  exp_avg_sq.mul_(h.beta2).addcmul_(g, g, 1.0 - h.beta2);
  const at::Tensor denom = (exp_avg_sq.sqrt() / std::sqrt(bias2)).add_(h.eps);
  p.addcdiv_(exp_avg, denom, -h.lr / bias1);
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
  // One fused launch per (weight decay on, dtype); the rest update one by one.
  std::map<std::pair<bool, at::ScalarType>, fused::AdamWLists> fused_groups;
  for (size_t k = 0; k < views_.size(); ++k) {
    const at::Tensor g = views_[k].grad();
    if (!g.defined()) continue;
    at::Tensor p = views_[k].value();
    at::Tensor& exp_avg = state(k, 0);
    at::Tensor& exp_avg_sq = state(k, 1);
    if (!exp_avg.defined()) exp_avg = at::zeros_like(p);
    if (!exp_avg_sq.defined()) exp_avg_sq = at::zeros_like(p);
    const bool decay = views_[k].weight_decay && options_.weight_decay != 0;
    if (fusable({p, g, exp_avg, exp_avg_sq})) {
      fused::AdamWLists& lists = fused_groups[{decay, p.scalar_type()}];
      lists.params.push_back(p);
      lists.grads.push_back(g);
      lists.exp_avgs.push_back(exp_avg);
      lists.exp_avg_sqs.push_back(exp_avg_sq);
    } else {
      explicit_update(p, g, exp_avg, exp_avg_sq, hyper(options_, lr, decay, steps_));
    }
  }
  for (const auto& [group, lists] : fused_groups)
    fused::adamw_step(lists, hyper(options_, lr, group.first, steps_));
}

}  // namespace vescale
