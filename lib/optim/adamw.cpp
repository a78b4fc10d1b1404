#include "optim/adamw.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <cmath>

namespace vescale {

AdamW::AdamW(std::vector<ParamView> views, AdamWOptions options)
    : Optimizer(std::move(views)), options_(options) {}

void AdamW::step(double lr) {
  torch::autograd::AutoGradMode no_grad(false);
  ++steps_;
  const double bias1 = 1.0 - std::pow(options_.beta1, static_cast<double>(steps_));
  const double bias2 = 1.0 - std::pow(options_.beta2, static_cast<double>(steps_));
  for (size_t k = 0; k < views_.size(); ++k) {
    const at::Tensor g = views_[k].grad();
    if (!g.defined()) continue;
    at::Tensor p = views_[k].value();
    at::Tensor& exp_avg = state(k, 0);
    at::Tensor& exp_avg_sq = state(k, 1);
    if (!exp_avg.defined()) exp_avg = at::zeros_like(p);
    if (!exp_avg_sq.defined()) exp_avg_sq = at::zeros_like(p);
    if (views_[k].weight_decay && options_.weight_decay != 0)
      p.mul_(1.0 - lr * options_.weight_decay);
    exp_avg.mul_(options_.beta1).add_(g, 1.0 - options_.beta1);
    exp_avg_sq.mul_(options_.beta2).addcmul_(g, g, 1.0 - options_.beta2);
    const at::Tensor denom = (exp_avg_sq.sqrt() / std::sqrt(bias2)).add_(options_.eps);
    p.addcdiv_(exp_avg, denom, -lr / bias1);
  }
}

}  // namespace vescale
