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

struct Parameter {
  std::vector<int64_t> shape;
  ParamInit init;
  /// Set once materialised (parallelize_module or materialize).
  std::optional<DTensor> value;

  bool materialized() const { return value.has_value(); }
  DTensor& get();
  const DTensor& get() const;
};

using ParameterPtr = std::shared_ptr<Parameter>;

}  // namespace vescale
