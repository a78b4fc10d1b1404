#include "kernels/swiglu.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "kernels/cuda_kernels.h"

namespace vescale {
namespace local {

at::Tensor swiglu(const at::Tensor& gate, const at::Tensor& up) {
  return at::silu(gate) * up;
}

}  // namespace local

namespace {

struct SwigluNode : public torch::autograd::Function<SwigluNode> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& gate,
                            const at::Tensor& up) {
    ctx->save_for_backward({gate, up});
    return cuda_kernels::swiglu_forward(gate, up);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    auto [d_gate, d_up] = cuda_kernels::swiglu_backward(grads.at(0), saved[0], saved[1]);
    return {d_gate, d_up};
  }
};

}  // namespace

at::Tensor cuda_swiglu(const at::Tensor& gate, const at::Tensor& up) {
  return SwigluNode::apply(gate, up);
}

}  // namespace vescale
