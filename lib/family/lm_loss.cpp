#include "family/lm_loss.h"

#include "dtensor/ops.h"

namespace vescale {

DTensor lm_loss(const DTensor& logits, const DTensor& targets, double normalizer) {
  const int64_t rows = logits.size(0) * logits.size(1);
  // Mixed precision: the loss in float32 (bf16 logits lose the softmax's small terms).
  const DTensor scores =
      logits.to_local().scalar_type() == at::kBFloat16 ? ops::to_dtype(logits, at::kFloat) : logits;
  return ops::cross_entropy(ops::reshape(scores, {rows, logits.size(2)}),
                            ops::reshape(targets, {rows}), normalizer);
}

DTensor lm_head_loss(const DTensor& hidden, const DTensor& weight, const DTensor& targets,
                     int64_t vocab_size, double normalizer) {
  const int64_t rows = hidden.size(0) * hidden.size(1);
  return ops::linear_cross_entropy(ops::reshape(hidden, {rows, hidden.size(2)}), weight,
                                   ops::reshape(targets, {rows}), vocab_size, normalizer);
}

}  // namespace vescale
