#include "optim/adamw.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <cmath>

#include "core/error.h"

namespace vescale {

AdamW::AdamW(std::vector<std::pair<std::string, DTensor*>> params, AdamWOptions options)
    : params_(std::move(params)), state_(params_.size()), options_(options) {}

at::Tensor& AdamW::state(size_t index, const std::string& name) {
  State& s = state_[index];
  if (!s.exp_avg.defined()) {
    s.exp_avg = at::zeros_like(params_[index].second->to_local().detach());
    s.exp_avg_sq = at::zeros_like(params_[index].second->to_local().detach());
  }
  VS_CHECK(name == "exp_avg" || name == "exp_avg_sq", "[optim] AdamW has no state '{}'", name);
  return name == "exp_avg" ? s.exp_avg : s.exp_avg_sq;
}

void AdamW::step(double lr) {
  torch::autograd::AutoGradMode no_grad(false);
  ++step_;
  const double bias1 = 1.0 - std::pow(options_.beta1, static_cast<double>(step_));
  const double bias2 = 1.0 - std::pow(options_.beta2, static_cast<double>(step_));
  for (size_t k = 0; k < params_.size(); ++k) {
    const at::Tensor& p = params_[k].second->to_local();
    const at::Tensor& g = p.grad();
    if (!g.defined()) continue;
    State& s = state_[k];
    if (!s.exp_avg.defined()) {
      s.exp_avg = at::zeros_like(p);
      s.exp_avg_sq = at::zeros_like(p);
    }
    if (p.dim() >= 2 && options_.weight_decay != 0) p.mul_(1.0 - lr * options_.weight_decay);
    s.exp_avg.mul_(options_.beta1).add_(g, 1.0 - options_.beta1);
    s.exp_avg_sq.mul_(options_.beta2).addcmul_(g, g, 1.0 - options_.beta2);
    const at::Tensor denom = (s.exp_avg_sq.sqrt() / std::sqrt(bias2)).add_(options_.eps);
    p.addcdiv_(s.exp_avg, denom, -lr / bias1);
  }
}

}  // namespace vescale
