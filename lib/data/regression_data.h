// Teacher-student regression for the MLP: inputs x ~ N(0, 1) drawn from (seed, step, row), and
// targets from a fixed random teacher y = W2 tanh(W1 x) (docs/design.md §9). Tensors are on the CPU
// (NOTE [Host data]).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "data/token_data.h"

namespace vescale {

class TeacherRegression {
 public:
  TeacherRegression(int64_t d_in, int64_t d_out, uint64_t seed);
  /// Inputs and targets of a slice of step `step`'s global batch, in float64.
  std::pair<at::Tensor, at::Tensor> batch(int64_t step, const BatchSlice& slice) const;
  /// Validation batch `index` of `rows` rows (a separate stream).
  std::pair<at::Tensor, at::Tensor> val_batch(int64_t index, int64_t rows) const;

 private:
  std::pair<at::Tensor, at::Tensor> make(uint64_t stream, int64_t step,
                                         const BatchSlice& slice) const;
  int64_t d_in_, d_out_;
  uint64_t seed_;
  at::Tensor w1_, w2_;
};

}  // namespace vescale
