#include "kernels/rotary.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "kernels/cuda_kernels.h"
#include "kernels/local_kernels.h"

namespace vescale {
namespace {

struct RotaryNode : public torch::autograd::Function<RotaryNode> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            double theta, const at::Tensor& positions) {
    const at::Tensor inv_freq =
        local::rotary_inv_freq(x.size(3), theta, x.options().dtype(at::kFloat));
    ctx->saved_data["positions"] = positions;
    ctx->saved_data["inv_freq"] = inv_freq;
    return cuda_kernels::rotary(x, positions, inv_freq, /*inverse=*/false);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const at::Tensor positions = ctx->saved_data["positions"].toTensor();
    const at::Tensor inv_freq = ctx->saved_data["inv_freq"].toTensor();
    return {cuda_kernels::rotary(grads.at(0), positions, inv_freq, /*inverse=*/true), at::Tensor(),
            at::Tensor()};
  }
};

}  // namespace

at::Tensor cuda_rotary(const at::Tensor& x, double theta, const at::Tensor& positions) {
  return RotaryNode::apply(x, theta, positions);
}

}  // namespace vescale
