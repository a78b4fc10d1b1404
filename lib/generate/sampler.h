// How the next token is picked from a model's logits: greedy, or sampled with a temperature,
// top-k and top-p, from a seeded stream of uniform numbers that depends only on the seed, the
// sample and the step, so a seed gives the same text on every layout and every rank.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace vescale {

struct SamplingOptions {
  bool greedy = false;       ///< the most likely token (the first of equals)
  double temperature = 1.0;  ///< logits are divided by it (> 0)
  int64_t top_k = 0;         ///< keep the k most likely tokens (0: all)
  double top_p = 1.0;        ///< keep the most likely tokens whose probabilities reach p
  uint64_t seed = 0;
  /// Pick among the ids below it (0: the whole vocabulary): a tokenizer with fewer ids than the
  /// model's padded vocabulary decodes only those (NOTE [The data's tokenizer]).
  int64_t vocab_limit = 0;
};

/// The next token of sample `row` at step `step` from its logits [V] over the vocabulary (any
/// floating type; taken in float64).
int64_t pick_token(const at::Tensor& logits, const SamplingOptions& options, int64_t row,
                   int64_t step);

/// A uniform number in [0, 1) for (seed, row, step): splitmix64 of their mix.
double uniform_for(uint64_t seed, int64_t row, int64_t step);

}  // namespace vescale
