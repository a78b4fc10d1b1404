// Activation checkpointing (training.activation_checkpoint): which of a model's layers recompute
// what in their backward, and the layer runner that makes them (NOTE [Recompute] in
// dtensor/recompute.h). Full: a block keeps its input only; its backward reruns the block (its
// collectives and dropout masks included) and backpropagates through that. Selective: a block's
// attention core keeps q, k and v only and reruns in its backward. The embeddings and the head
// keep their activations.
#pragma once

#include <cstdint>
#include <vector>

#include "config/job_config.h"
#include "family/layered_model.h"
#include "family/model_family.h"

namespace vescale {

class ActivationCheckpoint {
 public:
  /// `layers`: the task's, in forward order; `layer_params`: each layer's parameters on this
  /// rank (the model's, alive as long as this).
  ActivationCheckpoint(const JobConfig& config, const std::vector<Layer>& layers,
                       std::vector<std::vector<DTensor*>> layer_params);

  /// What layer `layer` recomputes.
  Recompute mode(int64_t layer) const { return modes_.at(static_cast<size_t>(layer)); }

  /// Runs layers [first, end) through `run`: those that recompute one at a time, as their mode
  /// says, the others as they come. *Collective* like `run`, in the forward and again in the
  /// backward of a layer that recomputes.
  Tensors run_layers(int64_t first, int64_t end, const Tensors& inputs,
                     const ForwardContext& context, const LayerRunner& run) const;

 private:
  Tensors run_recomputed(int64_t layer, const Tensors& inputs, const ForwardContext& context,
                         const LayerRunner& run) const;

  std::vector<Recompute> modes_;                     ///< per layer
  std::vector<std::vector<DTensor*>> layer_params_;  ///< per layer
};

}  // namespace vescale
