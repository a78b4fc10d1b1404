// The loss of next-token families: the mean cross entropy of logits against the next tokens.
#pragma once

#include "dtensor/dtensor.h"

namespace vescale {

/// The mean next-token cross entropy of logits [B, T, V] against targets [B, T], in float32 for
/// bf16 logits. *Collective* over the logits' mesh (vocab-parallel when they are sharded on V).
/// `normalizer` > 0: a loss mask's, the targets' kIgnoreTarget count nothing and the sum is
/// divided by it (NOTE [Loss masks]).
DTensor lm_loss(const DTensor& logits, const DTensor& targets, double normalizer = 0);

/// The same loss of the head `weight` [V_padded, C], whose first `vocab_size` rows are tokens (the
/// rest padding), on hidden states [B, T, C], without the logits (NOTE [Fused LM loss]).
/// *Collective* over the hidden state's mesh.
DTensor lm_head_loss(const DTensor& hidden, const DTensor& weight, const DTensor& targets,
                     int64_t vocab_size, double normalizer = 0);

}  // namespace vescale
