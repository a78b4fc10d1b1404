#include "optim/optimizer.h"

#include <ATen/ATen.h>

namespace vescale {

Optimizer::Optimizer(std::vector<ParamView> views) : views_(std::move(views)) {}

at::Tensor& Optimizer::state(size_t k, size_t s) {
  if (state_.empty()) state_.assign(views_.size(), std::vector<at::Tensor>(state_names().size()));
  return state_[k][s];
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
      at::Tensor& t = state(k, s);
      if (!t.defined()) t = at::zeros_like(views_[k].value());
      out.push_back(
          {views_[k].name, names[s], t.view(views_[k].spec.local_shape()), views_[k].spec});
    }
  }
  return out;
}

}  // namespace vescale
