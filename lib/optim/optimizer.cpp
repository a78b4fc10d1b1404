#include "optim/optimizer.h"

#include <ATen/ATen.h>

#include <map>
#include <string>
#include <utility>

#include "optim/adjacent_runs.h"

namespace vescale {

Optimizer::Optimizer(std::vector<ParamView> views) : views_(std::move(views)) {}

at::Tensor& Optimizer::state(size_t k, size_t s) {
  if (state_.empty()) make_state();
  return state_[k][s];
}

void Optimizer::make_state() {
  const size_t names = state_names().size();
  state_.assign(views_.size(), std::vector<at::Tensor>(names));
  std::map<std::pair<at::ScalarType, std::string>, std::vector<size_t>> groups;
  for (size_t k : flat_order(views_)) {
    const at::Tensor& value = views_[k].value();
    groups[{value.scalar_type(), value.device().str()}].push_back(k);
  }
  for (const auto& [key, members] : groups) {
    int64_t total = 0;
    for (size_t k : members)
      total += views_[k].value().numel();
    for (size_t s = 0; s < names; ++s) {
      const at::Tensor buffer = at::zeros({total}, views_[members.front()].value().options());
      int64_t offset = 0;
      for (size_t k : members) {
        const int64_t numel = views_[k].value().numel();
        state_[k][s] = buffer.narrow(0, offset, numel);
        offset += numel;
      }
    }
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
