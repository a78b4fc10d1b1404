#include "optim/adamw.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <map>
#include <string>
#include <tuple>
#include <utility>

#include "core/torch_features.h"
#include "kernels/adamw_update.h"
#include "kernels/fused.h"

namespace vescale {
namespace {

/// Whether PyTorch's fused kernel can update these (NOTE [Fast paths]): CUDA, not float64, and
/// tensors it takes.
bool fusable(const std::vector<at::Tensor>& tensors) {
  const at::Tensor& p = tensors.front();
  return use_fused_adamw(p.device(), p.scalar_type()) && fused::adamw_takes(tensors);
}

AdamWHyper hyper(const AdamWOptions& o, double lr, bool decay, int64_t step) {
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
  std::map<Group, AdamWLists> groups;
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
    AdamWLists& lists = groups[{decay, p.scalar_type(), p.device().str(), fuse}];
    lists.params.push_back(p);
    lists.grads.push_back(g);
    lists.exp_avgs.push_back(exp_avg);
    lists.exp_avg_sqs.push_back(exp_avg_sq);
  }
  for (const auto& [group, lists] : groups) {
    const AdamWHyper h = hyper(options_, lr, std::get<0>(group), steps_);
    if (std::get<3>(group)) {
      fused::adamw_step(lists, h);
    } else {
      local::adamw_step(lists, h);
    }
  }
}

}  // namespace vescale
