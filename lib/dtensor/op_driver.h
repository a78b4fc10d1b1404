// Running an op on DTensors: apply the op's rule per mesh dim, redistribute inputs, insert the
// gradient reductions NOTE [Gradient placements] asks for, and run the op on the local pieces.
// Internal to dtensor/.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <vector>

#include "dtensor/dtensor.h"
#include "dtensor/sharding_rules.h"

namespace vescale::detail {

/// The op on local pieces; `specs` are the inputs' specs after redistribution (null if absent),
/// `output` the result's spec.
using LocalFn = std::function<at::Tensor(const std::vector<at::Tensor>& locals,
                                         const std::vector<const DTensorSpec*>& specs,
                                         const DTensorSpec& output)>;

struct OpCall {
  const char* name;
  std::vector<const DTensor*> inputs;  ///< null for an absent optional input
  /// The rule for one mesh dim; may depend on the mesh dim's size.
  std::function<DimRule(int64_t mesh_size)> rule;
  std::vector<int64_t> output_shape;  ///< global
  LocalFn local;
};

DTensor run_op(const OpCall& call);

/// An op with several outputs that share the rule's output placements (a fused op's parts):
/// `local` returns their local pieces in order, given their specs.
using MultiLocalFn = std::function<std::vector<at::Tensor>(
    const std::vector<at::Tensor>& locals, const std::vector<const DTensorSpec*>& specs,
    const std::vector<DTensorSpec>& outputs)>;

struct MultiOpCall {
  const char* name;
  std::vector<const DTensor*> inputs;  ///< null for an absent optional input
  std::function<DimRule(int64_t mesh_size)> rule;
  std::vector<std::vector<int64_t>> output_shapes;  ///< global
  MultiLocalFn local;
};

std::vector<DTensor> run_op(const MultiOpCall& call);

}  // namespace vescale::detail
