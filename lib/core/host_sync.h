// Where a training step waits for its device: reading values a GPU computed (a loss, a gradient
// norm) makes the host wait for every kernel queued before them. A step does that once
// (NOTE [One host sync]); this is the one door, and it counts who goes through.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace vescale {

/// The elements of `values` (any device, any floating type, any shape) on the host as doubles,
/// in order. Counted by host_syncs().
std::vector<double> host_values(const at::Tensor& values);
/// How many host_values calls this process made.
int64_t host_syncs();

}  // namespace vescale
