// LayeredModel: a model as an ordered list of layers that can run a contiguous range of them,
// so that a pipeline stage runs only its own (docs/design.md §14). A model's forward is the run of
// all.
#pragma once

#include <cstdint>

#include "dmodule/module.h"

namespace vescale::models {

class LayeredModel {
 public:
  virtual ~LayeredModel() = default;
  /// Layers in forward order.
  virtual int64_t layer_count() const = 0;
  /// Runs layers [first, end) on `inputs` (layer 0 takes the model's inputs; the last returns
  /// its outputs). *Collective* like the forward.
  virtual Tensors run_layers(int64_t first, int64_t end, const Tensors& inputs) = 0;
};

}  // namespace vescale::models
