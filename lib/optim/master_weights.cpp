#include "optim/master_weights.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include "core/error.h"

namespace vescale {

MasterWeights::MasterWeights(std::vector<ParamView> views,
                             const std::function<at::Tensor(const ParamView&)>& initial)
    : params_(std::move(views)), grads_(params_.size()) {
  int64_t offset = 0;
  for (size_t k = 0; k < params_.size(); ++k) {
    const ParamView& view = params_[k];
    ParamView master = view;
    master.flat = initial(view).to(at::kFloat).contiguous().view({-1});
    VS_CHECK(master.flat.numel() == view.flat.numel(),
             "[optim] master weights of {}: {} elements for a view of {}", view.name,
             master.flat.numel(), view.flat.numel());
    master.flat_grad = [this, k] { return grads_[k]; };
    masters_.push_back(std::move(master));
    offsets_.push_back(offset);
    offset += view.flat.numel();
  }
}

void MasterWeights::take_grads() {
  torch::autograd::AutoGradMode no_grad(false);
  for (size_t k = 0; k < params_.size(); ++k) {
    const at::Tensor g = params_[k].grad();
    if (!g.defined() || g.scalar_type() == at::kFloat) {
      grads_[k] = g;
      continue;
    }
    if (!grad_buffer_.defined()) {
      const int64_t total = offsets_.back() + params_.back().flat.numel();
      grad_buffer_ = at::empty({total}, g.options().dtype(at::kFloat));
    }
    grads_[k] = grad_buffer_.narrow(0, offsets_[k], g.numel());
    grads_[k].copy_(g.reshape({-1}));
  }
}

int64_t MasterWeights::grad_bytes() const {
  return grad_buffer_.defined() ? static_cast<int64_t>(grad_buffer_.nbytes()) : 0;
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
