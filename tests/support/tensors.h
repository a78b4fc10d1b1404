// Deterministic test tensors and the piece of a full tensor a rank holds.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

#include "dtensor/dtensor_spec.h"

namespace vescale::testing {

/// sin(0.7318 i + phase) over the elements, in float64: distinct, bounded, no ties.
at::Tensor pattern(const std::vector<int64_t>& shape, double phase);
/// This rank's piece of `full` under `spec` (Partial dims keep the whole).
at::Tensor box_of(const at::Tensor& full, const DTensorSpec& spec);
/// The elements of `t` (any device, floating type and shape) as doubles, in order.
std::vector<double> to_vector(const at::Tensor& t);

/// A CUDA device as a name only, for the tests of what a device chooses: nothing is allocated on
/// it, so they run where there is no GPU.
inline const c10::Device kGpu(c10::kCUDA, 0);

}  // namespace vescale::testing
