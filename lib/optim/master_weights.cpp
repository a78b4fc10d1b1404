#include "optim/master_weights.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include "core/error.h"

namespace vescale {

MasterWeights::MasterWeights(std::vector<ParamView> views,
                             const std::function<at::Tensor(const ParamView&)>& initial)
    : params_(std::move(views)) {
  for (const ParamView& view : params_) {
    ParamView master = view;
    master.flat = initial(view).to(at::kFloat).contiguous().view({-1});
    VS_CHECK(master.flat.numel() == view.flat.numel(),
             "[optim] master weights of {}: {} elements for a view of {}", view.name,
             master.flat.numel(), view.flat.numel());
    master.flat_grad = [grad = view.flat_grad] {
      const at::Tensor g = grad();
      return g.defined() && g.scalar_type() != at::kFloat ? g.to(at::kFloat) : g;
    };
    masters_.push_back(std::move(master));
  }
}

void MasterWeights::copy_to_params() {
  torch::autograd::AutoGradMode no_grad(false);
  for (size_t k = 0; k < params_.size(); ++k)
    params_[k].flat.copy_(masters_[k].flat);
}

int64_t MasterWeights::bytes() const {
  int64_t total = 0;
  for (const ParamView& m : masters_)
    total += static_cast<int64_t>(m.flat.nbytes());
  return total;
}

}  // namespace vescale
