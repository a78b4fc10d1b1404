#include "family/hf_layout.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "core/error.h"

namespace vescale {

HFTensor same_tensor(const std::string& name, std::vector<int64_t> shape) {
  return {name,
          std::move(shape),
          {name},
          [](const std::vector<at::Tensor>& ours) { return ours.at(0); },
          [](const at::Tensor& hf, const std::vector<std::vector<int64_t>>&) {
            return std::vector<at::Tensor>{hf};
          }};
}

HFTensor transposed(const std::string& name, int64_t in, int64_t out) {
  return {name,
          {in, out},
          {name},
          [](const std::vector<at::Tensor>& ours) { return ours.at(0).t().contiguous(); },
          [](const at::Tensor& hf, const std::vector<std::vector<int64_t>>&) {
            return std::vector<at::Tensor>{hf.t().contiguous()};
          }};
}

HFTensor concatenated(const std::string& name, std::vector<std::string> sources, int64_t rows,
                      std::vector<int64_t> trailing, bool conv1d) {
  const auto n = static_cast<int64_t>(sources.size());
  std::vector<int64_t> shape{n * rows};
  shape.insert(shape.end(), trailing.begin(), trailing.end());
  if (conv1d) std::reverse(shape.begin(), shape.end());
  return {name, shape, std::move(sources),
          [conv1d](const std::vector<at::Tensor>& ours) {
            const at::Tensor cat = at::cat(ours, 0);
            return conv1d ? cat.t().contiguous() : cat;
          },
          [conv1d, n](const at::Tensor& hf, const std::vector<std::vector<int64_t>>&) {
            const at::Tensor ours = conv1d ? hf.t() : hf;
            std::vector<at::Tensor> out;
            for (const at::Tensor& piece : ours.chunk(n, 0))
              out.push_back(piece.contiguous());
            return out;
          }};
}

HFTensor vocab_rows(const std::string& hf_name, const std::string& ours, int64_t vocab,
                    int64_t width) {
  return {hf_name,
          {vocab, width},
          {ours},
          [vocab](const std::vector<at::Tensor>& p) { return p.at(0).narrow(0, 0, vocab); },
          [vocab](const at::Tensor& hf, const std::vector<std::vector<int64_t>>& shapes) {
            VS_USER_CHECK(shapes.at(0).at(0) >= vocab,
                          "[hf] {} vocabulary rows do not fit the model's {}", vocab,
                          shapes.at(0).at(0));
            at::Tensor padded = at::zeros(shapes.at(0), hf.options());
            padded.narrow(0, 0, vocab).copy_(hf);
            return std::vector<at::Tensor>{padded};
          }};
}

}  // namespace vescale
