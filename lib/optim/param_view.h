// ParamView: the piece of a parameter an optimizer updates — a flat range of the parameter's
// local tensor — with that piece's place in the global tensor. Today a view is a whole local
// shard; ZeRO ([8]) gives each dp rank a range of it. Optimizer state has the view's size and the
// view's spec, so checkpoints save and reshard it without knowing how it was split.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "dtensor/dtensor.h"

namespace vescale {

struct ParamView {
  std::string name;          ///< the parameter's FQN
  DTensor* param;            ///< whose local tensor (contiguous) the view is a range of
  int64_t offset = 0;        ///< first element of the range in the flat local tensor
  int64_t numel = 0;         ///< elements in the range
  DTensorSpec spec;          ///< where the range sits in the global tensor (its local box)
  bool weight_decay = true;  ///< decoupled weight decay applies (not to biases and norms)

  /// The whole local shard of `param`, placed by `spec` (the parameter's spec, possibly on a
  /// larger mesh); weight decay for parameters of 2 or more dims.
  static ParamView whole(std::string name, DTensor* param, DTensorSpec spec);

  /// The range of the parameter's local tensor, flat (writes go to the parameter).
  at::Tensor value() const;
  /// The same range of its gradient, flat; undefined if there is none.
  at::Tensor grad() const;
};

/// Whole-shard views of named parameters, each placed by its own spec.
std::vector<ParamView> whole_views(const std::vector<std::pair<std::string, DTensor*>>& params);

}  // namespace vescale
