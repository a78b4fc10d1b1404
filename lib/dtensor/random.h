// Layout-free random numbers: a counter-based generator (Philox4x32-10) keyed by
// (seed, stream, global element index). A shard materialises its values without the full tensor
// and equals the same slice of the single-device tensor bit for bit, under any mesh and plan.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/device.h"
#include "dtensor/dtensor_spec.h"

namespace vescale {

/// Which random stream: a job seed and a tensor id (e.g.
/// stream_id("transformer.h.0.mlp.c_fc.weight")).
struct RngKey {
  uint64_t seed = 0;
  uint64_t stream = 0;
};

/// A stable 64-bit id for a name (FNV-1a), the same on every rank and run.
uint64_t stream_id(std::string_view name);
/// The key of a sub-stream, e.g. the dropout mask of one layer at one step.
RngKey derive(RngKey key, uint64_t salt);

// Values are computed on the CPU in float64, then cast to `dtype` and moved to `device`.

/// Normal(mean, std) values of the box's elements.
at::Tensor normal(const RngKey& key, const Box& box, double mean, double std, at::ScalarType dtype,
                  Device device = kCpu);
/// Uniform[low, high) values of the box's elements.
at::Tensor uniform(const RngKey& key, const Box& box, double low, double high, at::ScalarType dtype,
                   Device device = kCpu);
/// A keep-mask (true with probability keep) of the box's elements.
at::Tensor keep_mask(const RngKey& key, const Box& box, double keep, Device device = kCpu);

}  // namespace vescale
