#include "support/tensors.h"

#include <ATen/ATen.h>

#include "dtensor/ring_attention.h"

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

at::Tensor ring_part(const at::Tensor& full, int64_t dim, int rank, int size) {
  const int64_t c = full.size(dim) / (2 * size);
  std::vector<at::Tensor> parts;
  for (int64_t id : ring_chunks(rank, size))
    parts.push_back(full.slice(dim, id * c, (id + 1) * c));
  return at::cat(parts, dim);
}

}  // namespace vescale::testing
