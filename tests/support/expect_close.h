// Comparing a parallel result with the single-device reference, printing what was measured.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

namespace vescale::testing {

/// Largest |a - b| / max(|b|, floor) over all elements (floor avoids dividing by ~0).
double max_relative_error(const at::Tensor& actual, const at::Tensor& reference,
                          double floor = 1e-6);

/// Adds a gtest failure unless every element satisfies |a - b| <= atol + rtol * |b|, naming
/// `label` and the first mismatches. Returns the max relative error.
double expect_close(const at::Tensor& actual, const at::Tensor& reference, double rtol, double atol,
                    const std::string& label);

}  // namespace vescale::testing
