#include "optim/optimizer.h"

#include <ATen/ATen.h>

#include <utility>

#include "optim/flat_layout.h"

namespace vescale {

Optimizer::Optimizer(std::vector<ParamView> views) : views_(std::move(views)) {}

at::Tensor& Optimizer::state(size_t k, size_t s) {
  if (state_.empty()) make_state();
  return state_[k][s];
}

void Optimizer::make_state() {
  const size_t names = state_names().size();
  state_.assign(views_.size(), std::vector<at::Tensor>(names));
  for (size_t s = 0; s < names; ++s) {
    const std::vector<at::Tensor> zeros = flat_zeros(views_);
    for (size_t k = 0; k < views_.size(); ++k)
      state_[k][s] = zeros[k];
  }
}

int64_t Optimizer::state_bytes() const {
  int64_t total = 0;
  for (const auto& per_view : state_)
    for (const at::Tensor& t : per_view)
      if (t.defined()) total += static_cast<int64_t>(t.nbytes());
  return total;
}

std::vector<OptimizerStateTensor> Optimizer::state_tensors() {
  std::vector<OptimizerStateTensor> out;
  const auto names = state_names();
  for (size_t k = 0; k < views_.size(); ++k) {
    for (size_t s = 0; s < names.size(); ++s) {
      const at::Tensor& t = state(k, s);
      out.push_back(
          {views_[k].name, names[s], t.view(views_[k].spec.local_shape()), views_[k].spec});
    }
  }
  return out;
}

}  // namespace vescale
