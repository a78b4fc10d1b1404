// The loss of next-token families: the mean cross entropy of logits against the next tokens.
#pragma once

#include "dtensor/dtensor.h"

namespace vescale {

/// The mean next-token cross entropy of logits [B, T, V] against targets [B, T], in float32 for
/// bf16 logits. *Collective* over the logits' mesh (vocab-parallel when they are sharded on V).
DTensor lm_loss(const DTensor& logits, const DTensor& targets);

}  // namespace vescale
