// Recompute: trading compute for memory in the backward (activation checkpointing).
//
// NOTE [Recompute]
// recompute_in_backward(forward, inputs) runs `forward` without recording autograd, so none of
// its intermediate tensors is kept, and gives its outputs one autograd node whose edges are the
// inputs. That node keeps the inputs only (references: a ZeRO-3 parameter freed after the
// forward is read again at backward time, once it has been gathered). Its backward runs
// `forward` again, grad mode on, on fresh leaves aliasing the inputs' memory, and backpropagates
// the outputs' gradients through that graph to the aliases the current backward needs
// (Node::task_should_compute_output: a zero-bubble I half asks for the activation's gradient
// only, a W half for the weights'); those gradients leave the node along its edges, so the
// parameters' hooks (grad sync, ZeRO) fire once, in the outer backward, as without recompute.
// Aliases rather than the inputs themselves: a backward that captured gradients at a
// parameter's own leaf would run that parameter's hooks on some LibTorch versions.
// The second forward is the first one again: the same ops on the same values in the same order,
// the same collectives (every rank of a group recomputes at the same point of its backward) and
// the same dropout masks (keyed by the forward context, not drawn from a generator), so the
// gradients are bitwise those of the plain forward.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <string>
#include <vector>

namespace vescale {

/// A computation on local tensors: outputs from inputs.
using LocalFunction = std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)>;

/// `forward(inputs)`, keeping only `inputs` for the backward, which recomputes it (NOTE
/// [Recompute]). `forward` must compute the same outputs from the same inputs every time, and
/// the inputs must hold the same values when the backward runs. Outputs that are not floating
/// point come back without a gradient. When grad mode is off or no input requires grad this is
/// `forward(inputs)`. `name` shows in autograd's error messages.
std::vector<at::Tensor> recompute_in_backward(LocalFunction forward, std::vector<at::Tensor> inputs,
                                              const std::string& name);

/// While one lives on this thread, ops::causal_attention keeps only q, k and v for its backward
/// and recomputes the attention core there (selective activation checkpointing): where its
/// kernel would keep the [B, H, T, T] probabilities (the explicit and blocked kernels; the fused
/// one keeps none).
class RecomputeAttentionScope {
 public:
  RecomputeAttentionScope();
  ~RecomputeAttentionScope();
  RecomputeAttentionScope(const RecomputeAttentionScope&) = delete;
  RecomputeAttentionScope& operator=(const RecomputeAttentionScope&) = delete;

  /// Whether a scope is open on this thread.
  static bool active();

 private:
  bool previous_;
};

}  // namespace vescale
