#include "optim/param_view.h"

#include <c10/util/accumulate.h>

#include "core/error.h"

namespace vescale {

ParamView ParamView::whole(std::string name, DTensor* param, DTensorSpec spec) {
  const at::Tensor& local = param->to_local();
  VS_CHECK(local.is_contiguous(), "[optim] parameter {} is not contiguous", name);
  VS_CHECK(c10::multiply_integers(spec.local_shape()) == local.numel(),
           "[optim] parameter {}: spec {} does not describe its local shard of {} elements", name,
           spec.str(), local.numel());
  const bool decay = param->ndim() >= 2;
  return ParamView{std::move(name), param, 0, local.numel(), std::move(spec), decay};
}

at::Tensor ParamView::value() const {
  return param->to_local().detach().view({-1}).narrow(0, offset, numel);
}

at::Tensor ParamView::grad() const {
  const at::Tensor& g = param->to_local().grad();
  if (!g.defined()) return g;
  return g.reshape({-1}).narrow(0, offset, numel);
}

std::vector<ParamView> whole_views(const std::vector<std::pair<std::string, DTensor*>>& params) {
  std::vector<ParamView> views;
  for (const auto& [name, param] : params)
    views.push_back(ParamView::whole(name, param, param->spec()));
  return views;
}

}  // namespace vescale
