#include "family/lm_loss.h"

#include "dtensor/ops.h"

namespace vescale {

DTensor lm_loss(const DTensor& logits, const DTensor& targets) {
  const int64_t rows = logits.size(0) * logits.size(1);
  // Mixed precision: the loss in float32 (bf16 logits lose the softmax's small terms).
  const DTensor scores =
      logits.to_local().scalar_type() == at::kBFloat16 ? ops::to_dtype(logits, at::kFloat) : logits;
  return ops::cross_entropy(ops::reshape(scores, {rows, logits.size(2)}),
                            ops::reshape(targets, {rows}));
}

}  // namespace vescale
