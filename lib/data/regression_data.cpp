#include "data/regression_data.h"

#include <ATen/ATen.h>

#include <cmath>

#include "dtensor/random.h"

namespace vescale {

TeacherRegression::TeacherRegression(int64_t d_in, int64_t d_out, uint64_t seed)
    : d_in_(d_in), d_out_(d_out), seed_(seed) {
  const int64_t hidden = 2 * std::max(d_in, d_out);
  w1_ = normal({seed, stream_id("teacher.w1")}, Box::whole({hidden, d_in}), 0.0,
               1.0 / std::sqrt(double(d_in)), at::kDouble);
  w2_ = normal({seed, stream_id("teacher.w2")}, Box::whole({d_out, hidden}), 0.0,
               1.0 / std::sqrt(double(hidden)), at::kDouble);
}

std::pair<at::Tensor, at::Tensor> TeacherRegression::make(uint64_t stream, int64_t step,
                                                          const BatchSlice& s) const {
  Box rows = Box::whole({s.global_rows, d_in_});
  rows.sizes = {s.rows, d_in_};
  rows.offsets = {s.row_offset, 0};
  at::Tensor x =
      normal(derive({seed_, stream}, static_cast<uint64_t>(step)), rows, 0.0, 1.0, at::kDouble);
  at::Tensor y = at::linear(at::tanh(at::linear(x, w1_)), w2_);
  return {x, y};
}

std::pair<at::Tensor, at::Tensor> TeacherRegression::batch(int64_t step,
                                                           const BatchSlice& slice) const {
  return make(stream_id("regression.train"), step, slice);
}

std::pair<at::Tensor, at::Tensor> TeacherRegression::val_batch(int64_t index, int64_t rows) const {
  return make(stream_id("regression.val"), index, BatchSlice{rows, 0, rows});
}

}  // namespace vescale
