#include "support/tensors.h"

#include <ATen/ATen.h>

namespace vescale::testing {

at::Tensor pattern(const std::vector<int64_t>& shape, double phase) {
  const int64_t numel = c10::multiply_integers(shape);
  return (at::arange(numel, at::kDouble) * 0.7318 + phase).sin().view(shape);
}

at::Tensor box_of(const at::Tensor& full, const DTensorSpec& spec) {
  std::vector<int64_t> sizes, offsets;
  spec.local_box(spec.mesh.coordinate(), sizes, offsets);
  at::Tensor out = full;
  for (size_t d = 0; d < sizes.size(); ++d)
    out = out.narrow(static_cast<int64_t>(d), offsets[d], sizes[d]);
  return out.contiguous();
}

}  // namespace vescale::testing
