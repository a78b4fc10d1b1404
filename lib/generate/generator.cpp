#include "generate/generator.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <optional>

#include "core/clock.h"
#include "core/error.h"
#include "dtensor/kv_cache.h"

namespace vescale {
namespace {

at::Tensor column(const std::vector<int64_t>& tokens) {
  return at::tensor(tokens, at::kLong).view({static_cast<int64_t>(tokens.size()), 1});
}

/// Whether `tokens` end with one of `stops`.
bool ends_with_stop(const std::vector<int64_t>& tokens,
                    const std::vector<std::vector<int64_t>>& stops) {
  for (const std::vector<int64_t>& stop : stops)
    if (!stop.empty() && tokens.size() >= stop.size() &&
        std::equal(stop.begin(), stop.end(),
                   tokens.end() - static_cast<std::ptrdiff_t>(stop.size())))
      return true;
  return false;
}

}  // namespace

std::optional<at::Tensor> forward_logits(ParallelModel& model, const at::Tensor& tokens) {
  const JobConfig& c = model.config();
  const std::optional<DTensor> logits =
      model.forward_outputs(Batch{tokens, at::Tensor(), ForwardContext::eval()});
  if (!logits) return std::nullopt;
  return logits->full_tensor().narrow(2, 0, c.family().vocab_size(c.model_spec())).cpu();
}

std::vector<int64_t> next_tokens(ParallelModel& model, const at::Tensor& tokens,
                                 const SamplingOptions& sampling, int64_t step) {
  const std::optional<at::Tensor> logits = forward_logits(model, tokens);
  const int64_t rows = tokens.size(0);
  at::Tensor picked = at::zeros({rows}, at::kLong);
  if (logits) {
    const int64_t vocab = logits->size(2);
    const int64_t limit = sampling.vocab_limit > 0 ? std::min(sampling.vocab_limit, vocab) : vocab;
    for (int64_t row = 0; row < rows; ++row) {
      picked[row] =
          pick_token((*logits)[row][logits->size(1) - 1].narrow(0, 0, limit), sampling, row, step);
    }
  }
  if (PipelineRunner* pipeline = model.pipeline()) {
    // The last stage's ranks picked: the other pp ranks take their tokens.
    at::Tensor on_device = picked.to(model.mesh().mesh().device());
    model.mesh().group("pp").broadcast(on_device, pipeline->schedule().stage_rank.back());
    picked = on_device.cpu();
  }
  return std::vector<int64_t>(picked.data_ptr<int64_t>(), picked.data_ptr<int64_t>() + rows);
}

std::pair<double, double> Generation::early_late_step_s() const {
  // The steps after the first (the prefill), in quarters.
  const auto n = static_cast<int64_t>(step_s.size()) - 1;
  const int64_t quarter = std::max<int64_t>(n / 4, 1);
  if (n < 1) return {0.0, 0.0};
  auto mean = [&](int64_t first) {
    double sum = 0;
    for (int64_t i = first; i < first + quarter; ++i)
      sum += step_s[static_cast<size_t>(i)];
    return sum / static_cast<double>(quarter);
  };
  return {mean(1), mean(1 + n - quarter)};
}

Generation generate(ParallelModel& model, const std::vector<int64_t>& prompt,
                    const GenerateOptions& o, const OnStep& on_step) {
  const JobConfig& c = model.config();
  VS_USER_CHECK(c.family().objective() == Objective::kNextToken,
                "generate: model.name = \"{}\" does not predict tokens", c.model);
  VS_USER_CHECK(c.cp == 1,
                "generate runs the whole sequence on each rank: set --parallel.cp=1 (a checkpoint "
                "of any layout loads on any other)");
  VS_USER_CHECK(o.max_new_tokens >= 1 && o.num_samples >= 1,
                "generate: --max-new-tokens and --num-samples must be at least 1");
  const int64_t block_size = c.model_keys.integer("block_size");
  const auto prompt_length = static_cast<int64_t>(prompt.size());
  VS_USER_CHECK(prompt_length >= 1 && prompt_length <= block_size,
                "generate: the prompt has {} tokens; it must have 1 to model.block_size = {}",
                prompt_length, block_size);
  torch::autograd::AutoGradMode no_grad(false);
  const auto start = Clock::now();
  Generation out;
  out.tokens.assign(static_cast<size_t>(o.num_samples), {});
  // The context the model sees, [num_samples, <= block_size], and with the cache the tokens of
  // it not cached yet.
  at::Tensor context = at::tensor(prompt, at::kLong).repeat({o.num_samples, 1});
  at::Tensor fresh = context;
  KvCache cache(block_size);
  std::optional<KvCacheScope> scope;
  if (o.use_cache) scope.emplace(&cache);
  // Every rank sees the same tokens, so every rank stops at the same step.
  std::vector<bool> ended(static_cast<size_t>(o.num_samples), false);
  for (int64_t step = 0; step < o.max_new_tokens; ++step) {
    const auto step_start = Clock::now();
    const std::vector<int64_t> next =
        next_tokens(model, o.use_cache ? fresh : context, o.sampling, step);
    if (o.use_cache) cache.advance(fresh.size(1));
    if (step == 0) out.first_token_s = seconds_since(start);
    for (size_t row = 0; row < next.size(); ++row) {
      if (ended[row]) continue;
      out.tokens[row].push_back(next[row]);
      ended[row] = ends_with_stop(out.tokens[row], o.stops);
    }
    out.step_s.push_back(seconds_since(step_start));
    if (on_step) on_step(step, next);
    if (std::all_of(ended.begin(), ended.end(), [](bool e) { return e; })) break;
    fresh = column(next);
    context = at::cat({context, fresh}, 1);
    if (context.size(1) > block_size) {
      // Restart from the last block_size / 2 tokens, prefilled again from position 0.
      context = context.narrow(1, context.size(1) - block_size / 2, block_size / 2).contiguous();
      fresh = context;
      cache.reset();
      ++out.restarts;
    }
  }
  out.total_s = seconds_since(start);
  out.cache_bytes = cache.bytes();
  return out;
}

}  // namespace vescale
