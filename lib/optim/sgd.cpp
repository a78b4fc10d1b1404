#include "optim/sgd.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

namespace vescale {

SGD::SGD(std::vector<ParamView> views, SGDOptions options)
    : Optimizer(std::move(views)), options_(options) {}

void SGD::step(double lr) {
  torch::autograd::AutoGradMode no_grad(false);
  ++steps_;
  for (size_t k = 0; k < views_.size(); ++k) {
    const at::Tensor g = views_[k].grad();
    if (!g.defined()) continue;
    at::Tensor p = views_[k].value();
    at::Tensor d = g;
    if (options_.weight_decay != 0 && views_[k].weight_decay) d = d + options_.weight_decay * p;
    at::Tensor& momentum = state(k, 0);
    // A resumed job's momentum holds the checkpoint's (steps_ was set before this step).
    if (started_.empty()) started_.assign(views_.size(), steps_ > 1);
    if (!started_[k]) {
      momentum.copy_(d);  // PyTorch's first step: the buffer is the gradient
      started_[k] = true;
    } else {
      momentum.mul_(options_.momentum).add_(d);
    }
    p.add_(momentum, -lr);
  }
}

}  // namespace vescale
