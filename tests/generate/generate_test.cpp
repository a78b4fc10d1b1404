// generate (NOTE [KV cache]) on threads-as-ranks, float64: with the cache, the logits at every
// position equal a full forward's without it; greedy tokens are the same on 1 process, tp2, tp4
// and pp2, with and without the cache; a seed's samples repeat and do not depend on the layout.
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <mutex>

#include "core/error.h"
#include "dtensor/kv_cache.h"
#include "generate/generator.h"
#include "support/run_ranks.h"
#include "support/training_runs.h"

namespace vescale {
namespace {

using Overrides = std::vector<std::string>;

JobConfig config_of(const std::string& toml, Overrides overrides) {
  overrides.push_back("job.dump_folder=\"" + testing::fresh_folder("vescale-generate") + "\"");
  overrides.push_back("model.block_size=32");
  return JobConfig::parse(toml, "generate_test.toml", overrides);
}

/// Runs `fn` on every rank of `config`'s mesh with its freshly initialised model (the same
/// weights on every layout); returns rank 0's result.
template <typename T>
T on_model(const JobConfig& config, const std::function<T(ParallelModel&)>& fn) {
  std::mutex mu;
  T out{};
  testing::run_ranks(static_cast<int>(config.world_size()), [&](const comm::Group& world) {
    ParallelModel model(config, world, JobPurpose::kEvaluate);
    T mine = fn(model);
    std::lock_guard<std::mutex> lock(mu);
    if (world.rank() == 0) out = std::move(mine);
  });
  return out;
}

/// The worst |difference| between the logits of a full forward over 20 tokens and those of a
/// 5-token prefill followed by 15 one-token forwards against the cache.
double cached_against_full(ParallelModel& model) {
  c10::AutoGradMode no_grad(false);
  const at::Tensor tokens = at::arange(40, at::kLong).view({2, 20}).mul(7).remainder(50);
  const at::Tensor full = forward_logits(model, tokens).value();
  KvCache cache(32);
  const KvCacheScope scope(&cache);
  std::vector<at::Tensor> parts{forward_logits(model, tokens.narrow(1, 0, 5)).value()};
  cache.advance(5);
  for (int64_t t = 5; t < 20; ++t) {
    parts.push_back(forward_logits(model, tokens.narrow(1, t, 1)).value());
    cache.advance(1);
  }
  return (at::cat(parts, 1) - full).abs().max().item<double>();
}

TEST(Generate, CachedLogitsEqualTheFullForward) {
  for (const auto& [toml, layout, label] :
       std::vector<std::tuple<std::string, Overrides, std::string>>{
           {testing::kGptRun, {}, "gpt 1 process"},
           {testing::kGptRun, {"parallel.tp=2", "parallel.plan=\"gpt/megatron-sp\""}, "gpt tp2 sp"},
           {testing::kLlamaRun, {}, "llama 1 process"},
           {testing::kLlamaRun,
            {"parallel.tp=2", "parallel.plan=\"llama/megatron-tp\""},
            "llama tp2"}}) {
    const double error = on_model<double>(config_of(toml, layout),
                                          [](ParallelModel& m) { return cached_against_full(m); });
    std::printf("%-20s worst |cached - full| logit over 20 positions: %.3g\n", label.c_str(),
                error);
    EXPECT_LE(error, 1e-12) << label;
  }
}

std::vector<std::vector<int64_t>> tokens_of(const JobConfig& config, const GenerateOptions& o) {
  return on_model<std::vector<std::vector<int64_t>>>(config, [&](ParallelModel& m) {
    return generate(m, {3, 1, 4, 1, 5}, o).tokens;
  });
}

TEST(Generate, GreedyTokensAreTheSameOnEveryLayoutWithAndWithoutTheCache) {
  for (const std::string& toml : {testing::kGptRun, testing::kLlamaRun}) {
    const bool gpt = toml == testing::kGptRun;
    GenerateOptions o;
    o.max_new_tokens = 24;
    o.num_samples = 2;
    o.sampling.greedy = true;
    const auto reference = tokens_of(config_of(toml, {}), o);
    ASSERT_EQ(reference.size(), 2u);
    ASSERT_EQ(reference[0].size(), 24u);
    GenerateOptions no_cache = o;
    no_cache.use_cache = false;
    EXPECT_EQ(tokens_of(config_of(toml, {}), no_cache), reference) << "no cache";
    const std::string plan = gpt ? "gpt/megatron-sp" : "llama/megatron-tp";
    for (int tp : {2, 4}) {
      EXPECT_EQ(tokens_of(config_of(toml, {"parallel.tp=" + std::to_string(tp),
                                           "parallel.plan=\"" + plan + "\""}),
                          o),
                reference)
          << toml.substr(0, 40) << " tp" << tp;
    }
    // Stages pass the activations along; the last stage's ranks pick.
    EXPECT_EQ(tokens_of(config_of(toml, {"parallel.pp=2"}), o), reference) << "pp2";
    EXPECT_EQ(tokens_of(config_of(toml, {"parallel.pp=2", "parallel.tp=2",
                                         "parallel.plan=\"" + plan + "\""}),
                        no_cache),
              reference)
        << "pp2 x tp2 without the cache";
    std::printf(
        "%s greedy, 24 tokens: the same on 1 process (with and without the cache), tp2, "
        "tp4, pp2 and pp2 x tp2\n",
        gpt ? "gpt" : "llama");
  }
}

TEST(Generate, MixtureOfExpertsTheSameOnEpLayoutsWithTheCache) {
  // NOTE [Expert parallelism]: every ep rank runs the prompt, its tokens meet the experts of the
  // others; the KV cache as for any Llama.
  const double error = on_model<double>(config_of(testing::kMixtralRun, {}),
                                        [](ParallelModel& m) { return cached_against_full(m); });
  std::printf("mixtral 1 process worst |cached - full| logit over 20 positions: %.3g\n", error);
  EXPECT_LE(error, 1e-12);
  GenerateOptions o;
  o.max_new_tokens = 24;
  o.num_samples = 2;
  o.sampling.greedy = true;
  const auto reference = tokens_of(config_of(testing::kMixtralRun, {}), o);
  ASSERT_EQ(reference[0].size(), 24u);
  for (const Overrides& layout :
       std::vector<Overrides>{{"parallel.dp=2", "parallel.ep=2"},
                              {"parallel.dp=4", "parallel.ep=4", "parallel.microbatches=2"},
                              {"parallel.pp=2", "parallel.dp=2", "parallel.ep=2"}}) {
    EXPECT_EQ(tokens_of(config_of(testing::kMixtralRun, layout), o), reference)
        << layout.front() << " " << layout.at(1);
  }
  std::printf(
      "mixtral greedy, 24 tokens with the cache: the same on 1 process, ep2, ep4 and "
      "pp2 x ep2\n");
}

TEST(Generate, SeededSamplesRepeatOnEveryLayout) {
  GenerateOptions o;
  o.max_new_tokens = 24;
  o.num_samples = 3;
  o.sampling.temperature = 1.5;
  o.sampling.top_k = 20;
  o.sampling.top_p = 0.95;
  o.sampling.seed = 7;
  const auto once = tokens_of(config_of(testing::kGptRun, {}), o);
  EXPECT_EQ(tokens_of(config_of(testing::kGptRun, {}), o), once);
  EXPECT_EQ(
      tokens_of(config_of(testing::kGptRun, {"parallel.tp=2", "parallel.plan=\"gpt/megatron-tp\""}),
                o),
      once);
  EXPECT_NE(once[0], once[1]) << "the samples of one prompt differ";
  GenerateOptions other = o;
  other.sampling.seed = 8;
  EXPECT_NE(tokens_of(config_of(testing::kGptRun, {}), other), once);
}

TEST(Generate, LongerThanTheBlockRestartsTheContext) {
  // 60 new tokens with block_size 32: the context restarts from its last 16 tokens; with and
  // without the cache the same tokens, on 1 process and tp2.
  GenerateOptions o;
  o.max_new_tokens = 60;
  o.sampling.greedy = true;
  const auto reference = tokens_of(config_of(testing::kGptRun, {}), o);
  ASSERT_EQ(reference.at(0).size(), 60u);
  GenerateOptions no_cache = o;
  no_cache.use_cache = false;
  EXPECT_EQ(tokens_of(config_of(testing::kGptRun, {}), no_cache), reference);
  EXPECT_EQ(
      tokens_of(config_of(testing::kGptRun, {"parallel.tp=2", "parallel.plan=\"gpt/megatron-sp\""}),
                o),
      reference);
}

TEST(Generate, APromptLongerThanTheBlockIsAClearError) {
  GenerateOptions o;
  try {
    on_model<int>(config_of(testing::kGptRun, {}), [&](ParallelModel& m) {
      generate(m, std::vector<int64_t>(33, 1), o);
      return 0;
    });
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("the prompt has 33 tokens; it must have 1 to "
                                         "model.block_size = 32"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace vescale
