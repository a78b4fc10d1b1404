// The learning-rate schedule: linear warmup, then cosine decay or constant.
#pragma once

#include <cstdint>

namespace vescale {

/// Linear warmup to `peak` over `warmup` steps, then cosine decay to min_ratio x peak at `total`
/// (or constant).
double lr_at(int64_t step, int64_t total, double peak, int64_t warmup, bool cosine,
             double min_ratio);

}  // namespace vescale
