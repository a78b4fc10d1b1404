#include "optim/adamw.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <utility>

#include "kernels/adamw_update.h"
#include "kernels/fused.h"
#include "kernels/kernel_table.h"
#include "optim/adjacent_runs.h"

namespace vescale {
namespace {

/// The AdamW path for one parameter's tensors (its value, gradient and moments): the kernel
/// table's for their device and dtype (NOTE [Kernel table]), unless that is the fused kernel and
/// it does not take these tensors.
const kernels::AdamWPath& adamw_path(const std::vector<at::Tensor>& tensors) {
  const at::Tensor& p = tensors.front();
  // A named context: GCC 14 takes a reference bound from a temporary argument for dangling.
  const kernels::KernelContext context{p.device(), p.scalar_type()};
  const kernels::AdamWPath& path = kernels::choose(kernels::kAdamWPaths, context);
  if (path.id == kernels::AdamWPathId::kFused && !fused::adamw_takes(tensors))
    return kernels::mark_taken(kernels::kAdamWPaths.back());
  return kernels::mark_taken(path);
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
  // One launch per group of alike tensors: (weight decay on, dtype, device, path). The paths
  // are rows of one array, so their addresses order them.
  using Group = std::tuple<bool, at::ScalarType, std::string, const kernels::AdamWPath*>;
  std::map<Group, std::vector<std::vector<at::Tensor>>> groups;  // {values, grads, m, v}
  for (size_t k = 0; k < views_.size(); ++k) {
    const at::Tensor g = views_[k].grad();
    if (!g.defined()) continue;
    const at::Tensor p = views_[k].value();
    const at::Tensor& exp_avg = state(k, 0);
    const at::Tensor& exp_avg_sq = state(k, 1);
    const bool decay = views_[k].weight_decay && options_.weight_decay != 0;
    const kernels::AdamWPath* path = &adamw_path({p, g, exp_avg, exp_avg_sq});
    auto& lists = groups[{decay, p.scalar_type(), p.device().str(), path}];
    if (lists.empty()) lists.resize(4);
    lists[0].push_back(p);
    lists[1].push_back(g);
    lists[2].push_back(exp_avg);
    lists[3].push_back(exp_avg_sq);
  }
  for (auto& [group, tensors] : groups) {
    // NOTE [Adjacent runs]: the flat buffers' views of a group merge into one run each.
    std::vector<std::vector<at::Tensor>> runs = merge_adjacent(std::move(tensors));
    AdamWLists lists{std::move(runs[0]), std::move(runs[1]), std::move(runs[2]), std::move(runs[3]),
                     at::Tensor()};
    if (std::get<3>(group)->id == kernels::AdamWPathId::kForeach)
      lists.scratch = scratch(lists.params.front());
    std::get<3>(group)->run(lists, hyper(options_, lr, std::get<0>(group), steps_));
  }
}

at::Tensor AdamW::scratch(const at::Tensor& like) {
  at::Tensor& buffer = scratch_[{like.scalar_type(), like.device().str()}];
  if (!buffer.defined()) {
    int64_t largest = 0;
    for (const ParamView& v : views_)
      largest = std::max(largest, v.flat.numel());
    buffer = at::empty({std::min(kScratchElements, largest)}, like.options());
  }
  return buffer;
}

}  // namespace vescale
