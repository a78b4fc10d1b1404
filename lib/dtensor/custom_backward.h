// Attaching a hand-written backward to a computation on local tensors: how collectives become
// differentiable (the backward of a collective is another collective, not autograd's guess).
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>

namespace vescale::detail {

using BackwardFn = std::function<at::Tensor(const at::Tensor& grad_output)>;

/// Runs `forward(input)` without recording autograd, then makes the result differentiable with
/// respect to `input` through `backward` (grad_output -> grad_input). When `input` needs no grad
/// (or grad mode is off) the result is returned as is. `name` shows in autograd error messages.
at::Tensor with_custom_backward(const at::Tensor& input,
                                const std::function<at::Tensor(const at::Tensor&)>& forward,
                                BackwardFn backward, const char* name);

}  // namespace vescale::detail
