#include "optim/master_weights.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include "core/error.h"
#include "optim/adjacent_runs.h"

namespace vescale {

MasterWeights::MasterWeights(std::vector<ParamView> views,
                             const std::function<at::Tensor(const ParamView&)>& initial)
    : params_(std::move(views)), grads_(params_.size()), layout_(params_) {
  // NOTE [Adjacent runs]: the copies in one float32 buffer, laid out as their gradients.
  const at::Tensor buffer =
      params_.empty()
          ? at::Tensor()
          : at::empty({layout_.total()}, params_.front().flat.options().dtype(at::kFloat));
  for (size_t k = 0; k < params_.size(); ++k) {
    const ParamView& view = params_[k];
    ParamView master = view;
    const at::Tensor value = initial(view).reshape({-1});
    VS_CHECK(value.numel() == view.flat.numel(),
             "[optim] master weights of {}: {} elements for a view of {}", view.name, value.numel(),
             view.flat.numel());
    master.flat = layout_.piece(buffer, k);
    master.flat.copy_(value);
    master.flat_grad = [this, k] { return grads_[k]; };
    masters_.push_back(std::move(master));
  }
  // One copy where the parameters share one buffer in the masters' order (parallel_model.cpp).
  std::vector<std::vector<at::Tensor>> pairs(2);
  for (size_t k = 0; k < params_.size(); ++k) {
    pairs[0].push_back(params_[k].flat);
    pairs[1].push_back(masters_[k].flat);
  }
  copy_runs_ = merge_adjacent(std::move(pairs));
}

void MasterWeights::take_grads() {
  torch::autograd::AutoGradMode no_grad(false);
  for (size_t k = 0; k < params_.size(); ++k) {
    const at::Tensor g = params_[k].grad();
    if (!g.defined() || g.scalar_type() == at::kFloat) {
      grads_[k] = g;
      continue;
    }
    if (!grad_buffer_.defined())
      grad_buffer_ = at::empty({layout_.total()}, g.options().dtype(at::kFloat));
    grads_[k] = layout_.piece(grad_buffer_, k);
    grads_[k].copy_(g.reshape({-1}));
  }
}

int64_t MasterWeights::grad_bytes() const {
  return grad_buffer_.defined() ? static_cast<int64_t>(grad_buffer_.nbytes()) : 0;
}

void MasterWeights::copy_to_params() {
  torch::autograd::AutoGradMode no_grad(false);
  for (size_t i = 0; i < copy_runs_[0].size(); ++i)
    copy_runs_[0][i].copy_(copy_runs_[1][i]);
}

int64_t MasterWeights::bytes() const {
  int64_t total = 0;
  for (const ParamView& m : masters_)
    total += static_cast<int64_t>(m.flat.nbytes());
  return total;
}

}  // namespace vescale
