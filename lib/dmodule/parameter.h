// A module parameter: declared with its shape and init recipe, materialised later as a DTensor
// (deferred init: nothing is allocated until its placements are known).
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dtensor/dtensor.h"
#include "dtensor/random.h"

namespace vescale {

/// How a parameter's values are made.
struct ParamInit {
  enum class Kind { kNormal, kZeros, kOnes, kUniform } kind = Kind::kNormal;
  double std = 0.02;   ///< kNormal
  double bound = 0.0;  ///< kUniform: U(-bound, bound)

  static ParamInit normal(double std) { return {Kind::kNormal, std}; }
  static ParamInit zeros() { return {Kind::kZeros, 0}; }
  static ParamInit ones() { return {Kind::kOnes, 0}; }
  static ParamInit uniform(double bound) { return {Kind::kUniform, 0, bound}; }
  /// This rank's piece under `spec`, from the layout-free generator (stream = the FQN), on the
  /// mesh's device.
  at::Tensor make(const RngKey& key, const DTensorSpec& spec, at::ScalarType dtype) const;
};

/// A parameter of one expert of a mixture-of-experts layer: expert `index` of the layer's `count`.
/// Expert parallelism over `ep` ranks holds it on one of them, holder(ep) (NOTE [Expert
/// parallelism] in dtensor/expert_dispatch.h).
struct ExpertSlot {
  int64_t index = 0;
  int64_t count = 1;
  /// The ep rank that holds it: the experts in blocks of count / ep, in order.
  int64_t holder(int64_t ep) const { return index / (count / ep); }
};

struct Parameter;

/// A low-rank adapter's factor (NOTE [LoRA]): A [rank, in] or B [out, rank] of the adapter on
/// weight `base` [out, in]. Its placements follow the base's (NOTE [LoRA placements]).
struct AdapterOf {
  enum class Factor { kA, kB } factor = Factor::kA;
  const Parameter* base = nullptr;
};

struct Parameter {
  std::vector<int64_t> shape;
  ParamInit init;
  /// Set for an expert's parameter.
  std::optional<ExpertSlot> expert;
  /// False for a weight a fine-tune keeps frozen (NOTE [LoRA]): materialised and loaded, but no
  /// gradient, no optimizer state, no gradient sync, and not in the fine-tune's checkpoints.
  bool trainable = true;
  /// Set for a low-rank adapter's factor.
  std::optional<AdapterOf> adapter;
  /// Set once materialised (parallelize_module or materialize).
  std::optional<DTensor> value;

  bool materialized() const { return value.has_value(); }
  DTensor& get();
  const DTensor& get() const;
};

using ParameterPtr = std::shared_ptr<Parameter>;

}  // namespace vescale
