// LayeredModel: a model as an ordered list of layers that can run a contiguous range of them,
// so that a pipeline stage runs only its own (docs/design.md §14), with the forward context (train
// or eval, the dropout masks' key) passed to every run rather than left in the model.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <optional>

#include "comm/group.h"
#include "dmodule/module.h"

namespace vescale {

/// What one forward is for: training (dropout on, masks keyed by the step and the rows of the
/// global batch this rank's activations are) or evaluation (dropout off).
struct ForwardContext {
  bool training = true;
  /// The dropout masks' counter: the optimizer step a training micro-batch belongs to.
  uint64_t step = 0;
  /// The rows this rank's activations are of the whole batch (data parallel, micro-batches).
  int64_t row_offset = 0;
  int64_t global_rows = -1;
  /// Context parallelism: the cp ring whose part of each sequence this rank holds (NOTE [Ring
  /// attention]); null: whole sequences. The layer runner opens its ContextParallelScope.
  const comm::Group* cp = nullptr;
  /// The next tokens of the batch's rows [B, T] (Replicate), for a forward that ends in the loss:
  /// a model whose last layer can take its loss itself (NOTE [Fused LM loss]) returns the mean
  /// loss from it instead of its outputs. Undefined: the outputs.
  at::Tensor targets = at::Tensor();
  /// A loss mask's normalizer (NOTE [Loss masks]): the targets may be kIgnoreTarget and the
  /// loss's sum is divided by this; 0: the mean over the rows.
  double loss_normalizer = 0;
  /// The factor the schedule's backward applies to this forward's loss (1 / micro-batches): what
  /// a loss term a layer attaches to its own backward is scaled by (NOTE [MoE auxiliary loss]).
  double loss_scale = 1.0;
  /// Expert parallelism: the ep group whose ranks hold the other experts of each MoE layer, and
  /// to which this rank's tokens go and come back (NOTE [Expert parallelism]); null: every
  /// expert here. The layer runner sets it.
  const comm::Group* ep = nullptr;

  /// Evaluation: no dropout.
  static ForwardContext eval() { return {false, 0, 0, -1, nullptr, at::Tensor(), 0}; }
};

/// What a mixture of experts' routers measured in the training forwards of one step on this rank
/// (NOTE [MoE auxiliary loss]), each micro-batch counted once.
struct RouterStats {
  at::Tensor aux_loss;  ///< scalar: each MoE layer's auxiliary loss, summed over layers and
                        ///< micro-batches
  at::Tensor load;      ///< [MoE layers, experts]: top-k slots routed to each expert
};

class LayeredModel {
 public:
  virtual ~LayeredModel() = default;
  /// Layers in forward order.
  virtual int64_t layer_count() const = 0;
  /// Runs layers [first, end) on `inputs` under `context` (layer 0 takes the model's inputs; the
  /// last returns its outputs). *Collective* like the forward.
  virtual Tensors run_layers(int64_t first, int64_t end, const Tensors& inputs,
                             const ForwardContext& context) = 0;
  /// A mixture of experts: what its routers measured in the training forwards of step `step`
  /// on this rank (zeros where this rank ran none); nullopt for a model without experts.
  virtual std::optional<RouterStats> router_stats(int64_t step) const {
    (void)step;
    return std::nullopt;
  }
};

/// Runs layers [first, end) of a model on `inputs`: the model's own run_layers, or a wrapper
/// around it (ZeRO-3 gathers each layer's parameters around it).
using LayerRunner = std::function<Tensors(int64_t first, int64_t end, const Tensors& inputs,
                                          const ForwardContext& context)>;

}  // namespace vescale
