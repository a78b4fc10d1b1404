// What context parallelism's ring sends, from a job's config alone (NOTE [Ring attention]): for
// plan lint, plan auto and the benchmark to state, and the tests to hold the measured bytes to.
#pragma once

#include "config/job_config.h"

namespace vescale {

struct RingVolume {
  double kv_pair_bytes = 0;   ///< one rank's keys and values for one attention call
  double calls = 0;           ///< attention calls per step on a rank: its blocks x micro-batches
  double sends_per_call = 0;  ///< pairs a rank sends per call: 3 (cp - 1), more with reruns
  /// Bytes a rank sends over cp per step: per call its pair P - 1 times in the forward, and in
  /// the backward P - 1 times again with P - 1 hops of their gradients.
  double send_bytes_per_step = 0;
};

/// The ring volume of `c` on a rank of the first pipeline stage (blocks: n_layer / pp, rounded
/// up). Keys and values are as attention takes them: C / tp wide (grouped-query heads repeated),
/// T / cp tokens of micro_batch_size() rows, in the compute dtype; activation checkpointing
/// ("full") runs the forward's ring again in the backward. All zero without cp or blocks.
RingVolume ring_volume(const JobConfig& c);

}  // namespace vescale
