// Which dtype each kind of state is kept in, decided once from training.dtype (issue [27]): the
// trainer, the optimizer, grad sync, checkpoints and the memory estimate all ask this.
#pragma once

#include <c10/core/ScalarType.h>

namespace vescale {

struct JobConfig;

struct DTypePolicy {
  c10::ScalarType compute = c10::kFloat;  ///< parameters, activations, gradients
  /// Optimizer states and, where it differs from compute, the master weights (float32 under
  /// bfloat16); initialisation and the loss run in it too.
  c10::ScalarType state = c10::kFloat;
  /// Gradients are summed across replicas in this dtype (state's: bf16 gradients in float32).
  c10::ScalarType reduce = c10::kFloat;

  /// Whether the model keeps master weights apart from its compute copies (mixed precision).
  bool mixed() const { return state != compute; }
};

/// training.dtype as a policy: float32 and float64 keep everything in it; bfloat16 computes in
/// bfloat16 over float32 masters, optimizer states and gradient sums.
DTypePolicy dtype_policy(const JobConfig& config);

}  // namespace vescale
