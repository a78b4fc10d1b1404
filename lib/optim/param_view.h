// ParamView: the piece of a parameter an optimizer updates — flat elements of the parameter's
// memory — with that piece's place in the global tensor. Without ZeRO a view is a whole local
// shard; under ZeRO ([8]) each dp rank's view is its rows of it (NOTE [ZeRO pieces]), and at
// ZeRO-3 the rows live in their own tensor. Optimizer state has the view's size and the view's
// spec, so checkpoints save and reshard it without knowing how it was split.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dtensor/dtensor.h"

namespace vescale {

struct ParamView {
  std::string name;  ///< the parameter's FQN
  /// The elements the update writes, flat: a view of the parameter's memory.
  at::Tensor flat;
  /// The gradient of those elements, flat; an undefined tensor if there is none.
  std::function<at::Tensor()> flat_grad;
  DTensorSpec spec;          ///< where the elements sit in the global tensor (its local box)
  bool weight_decay = true;  ///< decoupled weight decay applies (not to biases and norms)
  int64_t offset = 0;        ///< the first element's place in the parameter's flat local shard

  /// The whole local shard of `param`, placed by `spec` (the parameter's spec, possibly on a
  /// larger mesh); weight decay for parameters of 2 or more dims.
  static ParamView whole(std::string name, DTensor* param, DTensorSpec spec);
  /// Elements [offset, offset + numel) of the flat local shard of `param`, placed by `spec`
  /// (whose local box has numel elements), with the same range of the parameter's gradient.
  static ParamView range(std::string name, DTensor* param, int64_t offset, int64_t numel,
                         DTensorSpec spec);

  at::Tensor value() const { return flat; }
  at::Tensor grad() const { return flat_grad(); }
};

/// Whether decoupled weight decay applies to a parameter of `ndim` dims: matrices, not biases and
/// norms (a view's weight_decay; the first part of flat_order()).
inline bool takes_weight_decay(int64_t ndim) {
  return ndim >= 2;
}

/// Whole-shard views of named parameters, each placed by its own spec.
std::vector<ParamView> whole_views(const std::vector<std::pair<std::string, DTensor*>>& params);

}  // namespace vescale
