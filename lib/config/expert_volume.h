// What expert parallelism's all-to-alls send, from a job's config alone (NOTE [Expert
// parallelism]): for plan lint and plan auto to state and price, and the tests to hold to the
// bytes dispatch_to_experts counts (expert_dispatch_bytes).
#pragma once

#include "config/job_config.h"

namespace vescale {

/// Per MoE layer and micro-batch on one rank, with balanced routing: each of the rank's T tokens
/// goes to k experts, as many to each expert, so (ep - 1) / ep of every all-to-all's buffer
/// leaves the rank.
struct ExpertVolume {
  double row_bytes = 0;        ///< a token's hidden state: C elements of the compute dtype
  double routed_rows = 0;      ///< rows a rank routes per call: T x k, the row all-to-all's buffer
  double count_bytes = 0;      ///< the counts all-to-all's buffer: num_experts int64s
  double row_exchanges = 0;    ///< row all-to-alls per call: 2 forward, 2 backward, 2 per rerun
  double count_exchanges = 0;  ///< counts all-to-alls per call: 1, and 1 per rerun
  double calls = 0;  ///< MoE layer forwards per step on a rank: its blocks x micro-batches
  /// Bytes a rank sends over ep per step: (ep - 1) / ep of each all-to-all's buffer.
  double send_bytes_per_step = 0;
};

/// The all-to-all volume of `c` on a rank of the first pipeline stage (blocks: n_layer / pp,
/// rounded up; every block of a mixture of experts is an MoE layer). A rank's T tokens are
/// micro_batch_size() rows of seq_len / cp; full recompute (training.activation_checkpoint)
/// reruns a recomputing block's forward, its all-to-alls included, in its backward. All zero
/// without experts or with ep = 1.
ExpertVolume expert_volume(const JobConfig& c);

}  // namespace vescale
