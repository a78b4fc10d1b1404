#include "config/expert_volume.h"

#include <cmath>
#include <optional>

#include "config/memory_estimate.h"

namespace vescale {

ExpertVolume expert_volume(const JobConfig& c) {
  ExpertVolume v;
  const std::optional<TransformerShape> shape = c.family().transformer_shape(c.model_spec());
  const int64_t experts = c.family().experts_per_layer(c.model_spec());
  if (c.ep == 1 || experts == 0 || !shape) return v;
  const double tokens = static_cast<double>(c.micro_batch_size()) * static_cast<double>(c.seq_len) /
                        static_cast<double>(c.cp);
  v.row_bytes = static_cast<double>(shape->n_embd) * compute_element_bytes(c);
  v.routed_rows = tokens * static_cast<double>(shape->experts_per_token);
  v.count_bytes = static_cast<double>(experts) * static_cast<double>(sizeof(int64_t));
  // Full recompute reruns a recomputing block's forward, its three all-to-alls included.
  const double rerun = c.activation_checkpoint == Recompute::kFull ? c.recomputed_share() : 0.0;
  v.row_exchanges = 4.0 + 2.0 * rerun;
  v.count_exchanges = 1.0 + rerun;
  const double blocks = std::ceil(static_cast<double>(shape->n_layer) / static_cast<double>(c.pp));
  v.calls = blocks * static_cast<double>(c.microbatches);
  const double ep = static_cast<double>(c.ep);
  v.send_bytes_per_step =
      v.calls * (ep - 1.0) / ep *
      (v.row_exchanges * v.routed_rows * v.row_bytes + v.count_exchanges * v.count_bytes);
  return v;
}

}  // namespace vescale
