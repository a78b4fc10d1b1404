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
  enum class Kind { kNormal, kZeros, kOnes } kind = Kind::kNormal;
  double std = 0.02;

  static ParamInit normal(double std) { return {Kind::kNormal, std}; }
  static ParamInit zeros() { return {Kind::kZeros, 0}; }
  static ParamInit ones() { return {Kind::kOnes, 0}; }
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

struct Parameter {
  std::vector<int64_t> shape;
  ParamInit init;
  /// Set for an expert's parameter.
  std::optional<ExpertSlot> expert;
  /// Set once materialised (parallelize_module or materialize).
  std::optional<DTensor> value;

  bool materialized() const { return value.has_value(); }
  DTensor& get();
  const DTensor& get() const;
};

using ParameterPtr = std::shared_ptr<Parameter>;

}  // namespace vescale
