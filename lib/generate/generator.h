// Generating tokens from a model on its mesh: the prompt's forward once (prefill), then one
// token per step, each step's forward on the new token alone against the KV cache (NOTE [KV
// cache]), or, without the cache, on the whole context so far. Every rank runs the same loop
// and picks the same tokens from the same gathered logits (generate/sampler.h).
//
// The context is at most model.block_size tokens. When the next token would not fit, the context
// restarts from its last block_size / 2 tokens (nanoGPT crops its context the same way, at every
// step): they are prefilled again, at positions from 0, and generation goes on. So a generation
// may be longer than block_size, and with or without the cache it sees the same contexts.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "generate/sampler.h"
#include "train/parallel_model.h"

namespace vescale {

struct GenerateOptions {
  int64_t max_new_tokens = 256;
  int64_t num_samples = 1;  ///< rows generated at once from the same prompt
  bool use_cache = true;
  SamplingOptions sampling;
  /// A sample ends once its new tokens end with one of these (a chat template's answer end, the
  /// end-of-text), and generation once every sample has; empty: max_new_tokens each.
  std::vector<std::vector<int64_t>> stops;
};

struct Generation {
  std::vector<std::vector<int64_t>> tokens;  ///< per sample, the new tokens (to its stop)
  double first_token_s = 0;                  ///< the prompt's forward and the first pick
  double total_s = 0;
  int64_t cache_bytes = 0;     ///< this rank's KV cache at the end
  int64_t restarts = 0;        ///< times the context restarted from its last block_size / 2 tokens
  std::vector<double> step_s;  ///< seconds of each step (its forward and pick)
  /// Mean seconds per step over the first and the last quarter of the steps after the first.
  std::pair<double, double> early_late_step_s() const;
};

/// Called after each step with its position among the new tokens and each sample's new token.
using OnStep = std::function<void(int64_t step, const std::vector<int64_t>& tokens)>;

/// Generates from `prompt` (token ids, at least one, at most model.block_size) with `model` (a
/// next-token family, cp = 1; any tp, plan and pipeline). *Collective* over the model's mesh.
Generation generate(ParallelModel& model, const std::vector<int64_t>& prompt,
                    const GenerateOptions& options, const OnStep& on_step = {});

/// The logits [B, t, vocab_size] (padding cut) of `tokens` [B, t], on every rank, or under a
/// pipeline on the ranks of its last stage (the stages pass the activations along); under an open
/// KvCacheScope `tokens` are the new ones after the cached. *Collective*.
std::optional<at::Tensor> forward_logits(ParallelModel& model, const at::Tensor& tokens);

/// Each sample's next token after `tokens` [B, t] at `step`, the same on every rank: picked where
/// the logits are and sent to the other pp ranks. *Collective*.
std::vector<int64_t> next_tokens(ParallelModel& model, const at::Tensor& tokens,
                                 const SamplingOptions& sampling, int64_t step);

}  // namespace vescale
