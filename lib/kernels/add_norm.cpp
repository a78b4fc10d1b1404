#include "kernels/add_norm.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "kernels/cuda_kernels.h"
#include "kernels/local_kernels.h"

namespace vescale {
namespace local {

std::pair<at::Tensor, at::Tensor> add_norm(NormKind kind, const at::Tensor& x,
                                           const at::Tensor& delta, const at::Tensor& w,
                                           const at::Tensor& b, double eps) {
  at::Tensor sum = x + delta;
  at::Tensor normed = kind == NormKind::kLayerNorm ? at::layer_norm(sum, {sum.size(-1)}, w, b, eps)
                                                   : local::rms_norm(sum, w, eps);
  return {sum, normed};
}

}  // namespace local

namespace {

struct AddNormNode : public torch::autograd::Function<AddNormNode> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                const at::Tensor& x, const at::Tensor& delta,
                                                const at::Tensor& w, const at::Tensor& b,
                                                int64_t kind, double eps) {
    const bool layer_norm = static_cast<NormKind>(kind) == NormKind::kLayerNorm;
    cuda_kernels::AddNorm out =
        cuda_kernels::add_norm_forward(layer_norm, x, delta, w, layer_norm ? b : at::Tensor(), eps);
    ctx->save_for_backward({out.sum, w, out.mean, out.rstd});
    ctx->set_materialize_grads(false);  // an unused output's gradient stays undefined: no pass
    ctx->saved_data["layer_norm"] = layer_norm;
    return {out.sum, out.normed};
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const bool layer_norm = ctx->saved_data["layer_norm"].toBool();
    // x and delta get the sum's gradient alike (the add's backward), in tensors of their own:
    // autograd may accumulate into either in place.
    cuda_kernels::AddNormGrads g = cuda_kernels::add_norm_backward(
        layer_norm, grads.at(0), grads.at(1), saved[0], saved[1], saved[2], saved[3]);
    return {g.d_x, g.d_delta, g.d_w, layer_norm ? g.d_b : at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

std::pair<at::Tensor, at::Tensor> cuda_add_norm(NormKind kind, const at::Tensor& x,
                                                const at::Tensor& delta, const at::Tensor& w,
                                                const at::Tensor& b, double eps) {
  const auto out = AddNormNode::apply(x, delta, w, b.defined() ? b : at::Tensor(),
                                      static_cast<int64_t>(kind), eps);
  return {out[0], out[1]};
}

}  // namespace vescale
