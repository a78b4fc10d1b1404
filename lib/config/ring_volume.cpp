#include "config/ring_volume.h"

#include <cmath>
#include <optional>

#include "config/memory_estimate.h"

namespace vescale {

RingVolume ring_volume(const JobConfig& c) {
  RingVolume v;
  const std::optional<TransformerShape> shape = c.family().transformer_shape(c.model_spec());
  if (c.cp == 1 || !shape) return v;
  const double element = compute_element_bytes(c);
  const double tokens = static_cast<double>(c.seq_len) / static_cast<double>(c.cp);
  const double width = static_cast<double>(shape->n_embd) / static_cast<double>(c.tp);
  v.kv_pair_bytes = 2.0 * static_cast<double>(c.micro_batch_size()) * tokens * width * element;
  const double blocks = std::ceil(static_cast<double>(shape->n_layer) / static_cast<double>(c.pp));
  v.calls = blocks * static_cast<double>(c.microbatches);
  // Full recompute reruns a recomputing block's forward, ring included, in its backward.
  const double rerun = c.activation_checkpoint == Recompute::kFull ? c.recomputed_share() : 0.0;
  v.sends_per_call = (3.0 + rerun) * static_cast<double>(c.cp - 1);
  v.send_bytes_per_step = v.calls * v.sends_per_call * v.kv_pair_bytes;
  return v;
}

}  // namespace vescale
