#include "dtensor/custom_backward.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/grad_mode.h>

#include "core/autograd_node.h"

namespace vescale::detail {
namespace {

struct CustomBackward : torch::autograd::Node {
  CustomBackward(BackwardFn fn, const char* name) : fn_(std::move(fn)), name_(name) {}

  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    if (!grads[0].defined()) return {at::Tensor()};
    return {fn_(grads[0])};
  }
  std::string name() const override { return name_; }

  // Release the closure (it may hold groups and tensors) once backward has run.
  void release_variables() override { fn_ = nullptr; }

 private:
  BackwardFn fn_;
  std::string name_;
};

}  // namespace

at::Tensor with_custom_backward(const at::Tensor& input,
                                const std::function<at::Tensor(const at::Tensor&)>& forward,
                                BackwardFn backward, const char* name) {
  const bool track = input.requires_grad() && torch::autograd::GradMode::is_enabled();
  at::Tensor output;
  {
    torch::autograd::AutoGradMode no_grad(false);
    output = forward(input.detach());
  }
  if (!track) return output;
  auto node = make_node<CustomBackward>(std::move(backward), name);
  node->set_next_edges(torch::autograd::collect_next_edges(input));
  torch::autograd::set_history(output, node);
  return output;
}

}  // namespace vescale::detail
