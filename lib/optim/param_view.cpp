#include "optim/param_view.h"

#include <c10/util/accumulate.h>

#include "core/error.h"

namespace vescale {

ParamView ParamView::whole(std::string name, DTensor* param, DTensorSpec spec) {
  return range(std::move(name), param, 0, param->to_local().numel(), std::move(spec));
}

ParamView ParamView::range(std::string name, DTensor* param, int64_t offset, int64_t numel,
                           DTensorSpec spec) {
  const at::Tensor& local = param->to_local();
  VS_CHECK(local.is_contiguous(), "[optim] parameter {} is not contiguous", name);
  VS_CHECK(c10::multiply_integers(spec.local_shape()) == numel,
           "[optim] parameter {}: spec {} does not describe a piece of {} elements", name,
           spec.str(), numel);
  VS_CHECK(offset >= 0 && offset + numel <= local.numel(),
           "[optim] parameter {}: elements [{}, {}) are outside its local shard of {}", name,
           offset, offset + numel, local.numel());
  const bool decay = takes_weight_decay(param->ndim());
  auto grad = [param, offset, numel] {
    const at::Tensor& g = param->to_local().grad();
    if (!g.defined()) return g;
    return g.reshape({-1}).narrow(0, offset, numel);
  };
  return ParamView{std::move(name),
                   local.detach().view({-1}).narrow(0, offset, numel),
                   grad,
                   std::move(spec),
                   decay,
                   offset};
}

std::vector<ParamView> whole_views(const std::vector<std::pair<std::string, DTensor*>>& params) {
  std::vector<ParamView> views;
  for (const auto& [name, param] : params)
    views.push_back(ParamView::whole(name, param, param->spec()));
  return views;
}

}  // namespace vescale
