#include "support/tensors.h"

#include <ATen/ATen.h>
#include <c10/util/accumulate.h>

namespace vescale::testing {

at::Tensor pattern(const std::vector<int64_t>& shape, double phase) {
  const int64_t numel = c10::multiply_integers(shape);
  return (at::arange(numel, at::kDouble) * 0.7318 + phase).sin().view(shape);
}

at::Tensor box_of(const at::Tensor& full, const DTensorSpec& spec) {
  const Box box = Box::local(spec);
  at::Tensor out = full;
  for (size_t d = 0; d < box.sizes.size(); ++d)
    out = out.narrow(static_cast<int64_t>(d), box.offsets[d], box.sizes[d]);
  return out.contiguous();
}

std::vector<double> to_vector(const at::Tensor& t) {
  const at::Tensor flat = t.detach().to(at::kCPU, at::kDouble).contiguous().view({-1});
  return std::vector<double>(flat.data_ptr<double>(), flat.data_ptr<double>() + flat.numel());
}

}  // namespace vescale::testing
