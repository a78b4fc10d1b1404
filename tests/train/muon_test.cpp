// NOTE [Muon]: the Newton-Schulz orthogonalization, and Muon's float64 runs on every layout
// against the 1-process run (losses and every parameter after 5 steps), across a resume, and
// the model without hidden matrices that AdamW updates whole.
#include "optim/muon.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "autoplan/layout_model.h"
#include "autoplan/muon_cost.h"
#include "config/job_config.h"
#include "support/training_runs.h"
#include "train/muon_params.h"

namespace vescale {
namespace {

using testing::expect_matches;
using testing::fresh_folder;
using testing::RunOutput;
using testing::train;

const std::string kMuonOptimizer = "optimizer.name=\"muon\"";

std::vector<std::string> with_muon(std::vector<std::string> overrides) {
  overrides.push_back(kMuonOptimizer);
  return overrides;
}

TEST(Muon, NewtonSchulzMakesTheSingularValuesNearOneOnEitherOrientation) {
  const at::Tensor u = at::randn({12, 7}, at::dtype(at::kDouble).device(at::kCPU));
  const at::Tensor o = newton_schulz(u, 5, 1e-7);
  const at::Tensor s = std::get<1>(at::linalg_svd(o, false));
  std::printf("[muon] singular values after 5 steps: %.3f .. %.3f\n", s.min().item<double>(),
              s.max().item<double>());
  // The quintic's fixed band (Keller Jordan): about 0.7 .. 1.2, not exactly 1.
  EXPECT_GT(s.min().item<double>(), 0.6);
  EXPECT_LT(s.max().item<double>(), 1.25);
  EXPECT_TRUE(at::equal(newton_schulz(u.t(), 5, 1e-7), o.t()));
  EXPECT_TRUE(at::equal(newton_schulz(at::zeros({3, 4}, at::kDouble), 5, 1e-7),
                        at::zeros({3, 4}, at::kDouble)));
  EXPECT_DOUBLE_EQ(muon_scale(64, 16, false), 2.0);
  EXPECT_DOUBLE_EQ(muon_scale(16, 64, false), 1.0);
  EXPECT_DOUBLE_EQ(muon_scale(16, 64, true), 0.2 * 8.0);
}

const RunOutput& muon_gpt_reference() {
  static const RunOutput ref = train(testing::kGptRun, with_muon({}));
  return ref;
}

TEST(Muon, GptLayoutsMatchOneProcess) {
  const std::string sp = "parallel.plan=\"gpt/megatron-sp\"";
  const std::vector<std::pair<std::string, std::vector<std::string>>> layouts{
      {"dp2", {"parallel.dp=2"}},
      {"dp2 zero 1", {"parallel.dp=2", "parallel.zero=1"}},
      {"dp2 zero 3", {"parallel.dp=2", "parallel.zero=3"}},
      {"tp2 megatron-sp", {"parallel.tp=2", sp}},
      {"pp2", {"parallel.pp=2", "parallel.microbatches=2"}},
      {"cp2", {"parallel.cp=2"}},
      {"dp2 x tp2 zero 2", {"parallel.dp=2", "parallel.tp=2", sp, "parallel.zero=2"}},
      // ZeRO over dp x cp: two dims split each matrix's state (NOTE [Muon exchange]).
      {"dp2 x cp2 zero 1", {"parallel.dp=2", "parallel.cp=2", "parallel.zero=1"}},
  };
  for (const auto& [label, layout] : layouts)
    expect_matches(train(testing::kGptRun, with_muon(layout)), muon_gpt_reference(),
                   "muon gpt " + label);
}

TEST(Muon, MixtralEpAndLlamaTpMatchOneProcess) {
  expect_matches(train(testing::kMixtralRun, with_muon({"parallel.dp=2", "parallel.ep=2"})),
                 train(testing::kMixtralRun, with_muon({})), "muon mixtral ep2 (dp2)");
  expect_matches(train(testing::kLlamaRun,
                       with_muon({"parallel.tp=2", "parallel.plan=\"llama/megatron-tp\""})),
                 train(testing::kLlamaRun, with_muon({})),
                 "muon llama tp2 (grouped-query attention)");
}

TEST(Muon, MomentumResumesAcrossLayouts) {
  // A constant learning rate: the first run's 3 steps are the schedule's first 3 of 5.
  const std::string constant = "lr_scheduler.decay=\"constant\"";
  const RunOutput ref = train(testing::kGptRun, with_muon({constant}));
  expect_matches(
      testing::resume_across(
          testing::kGptRun, {"parallel.dp=2", "parallel.tp=2", "parallel.plan=\"gpt/megatron-sp\""},
          "sharded", {"parallel.dp=2", "parallel.zero=3"}, with_muon({constant})),
      ref, "muon gpt dp2 x tp2 sharded -> dp2 zero 3");
}

TEST(Muon, AdamWParamsNameTheRolesAdamWKeeps) {
  // The embeddings (the tied LM head with them) under Muon too, their rows split by ZeRO-3.
  const std::string norms_and_biases = "optimizer.adamw_params=[\"norm\", \"bias\"]";
  const RunOutput ref = train(testing::kGptRun, with_muon({norms_and_biases}));
  EXPECT_NE(ref.losses.back(), muon_gpt_reference().losses.back());
  expect_matches(
      train(testing::kGptRun, with_muon({norms_and_biases, "parallel.dp=2", "parallel.zero=3"})),
      ref, "muon gpt, embeddings too, dp2 zero 3");
}

TEST(Muon, AnMlpWithoutHiddenMatricesIsAdamWWhole) {
  // Two layers: the input's and the output's, no hidden matrix: every parameter takes AdamW.
  const std::vector<std::string> two{"model.n_layers=2"};
  const RunOutput adamw = train(testing::kMlpRun, two);
  const RunOutput all_adamw = train(testing::kMlpRun, with_muon(two));
  expect_matches(all_adamw, adamw, "muon on a 2-layer mlp vs adamw", 0.0);
  // Four layers: the two hidden ones take Muon, so the run is another.
  const RunOutput four = train(testing::kMlpRun, with_muon({}));
  EXPECT_NE(four.losses.back(), train(testing::kMlpRun, {}).losses.back());
  expect_matches(train(testing::kMlpRun, with_muon({"parallel.dp=2", "parallel.zero=3"})), four,
                 "muon mlp (2 hidden matrices) dp2 zero 3");
  // Each of Muon's keys reaches the update: another value, another run.
  for (const std::string key : {"optimizer.muon_scale=\"shape\"", "optimizer.ns_steps=2",
                                "optimizer.nesterov=false", "optimizer.momentum=0.5"})
    EXPECT_NE(train(testing::kMlpRun, with_muon({key})).losses.back(), four.losses.back()) << key;
}

/// The last line of a run's metrics.jsonl (`overrides` on kGptRun), and the run's config.
std::pair<nlohmann::json, JobConfig> last_metrics(const std::vector<std::string>& overrides) {
  const std::string folder = fresh_folder();
  std::vector<std::string> with_folder = overrides;
  with_folder.push_back("job.dump_folder=\"" + folder + "\"");
  testing::train_in(folder, testing::kGptRun, with_folder, true);
  std::ifstream in(folder + "/metrics.jsonl");
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  std::filesystem::remove_all(folder);
  return {nlohmann::json::parse(last), JobConfig::parse(testing::kGptRun, "gpt.toml", overrides)};
}

/// Bytes of all-to-alls a metrics line counts under `dim`.
int64_t all_to_all_bytes(const nlohmann::json& metrics, const std::string& dim) {
  const auto& by_kind = metrics.at("comm_bytes_by_kind");
  if (!by_kind.contains(dim) || !by_kind.at(dim).contains("all_to_all")) return 0;
  return by_kind.at(dim).at("all_to_all").get<int64_t>();
}

// NOTE [Muon exchange]: what plan lint and plan auto count is what the collectives count, and
// MFU counts the Newton-Schulz FLOPs of every matrix once.
TEST(Muon, PredictedBytesAndFlopsAreTheMeasuredOnes) {
  const std::vector<std::string> layout{"parallel.dp=2", "parallel.tp=2", "parallel.zero=1",
                                        "parallel.plan=\"gpt/megatron-sp\"",
                                        "metrics.log_interval=1"};
  const nlohmann::json adamw = last_metrics(layout).first;
  const auto [muon, config] = last_metrics(with_muon(layout));
  const autoplan::LayoutModel lm = autoplan::layout_model(config);
  const std::map<std::string, int64_t> predicted =
      autoplan::muon_cost_by_rank(config, lm).at(0).sent_bytes;
  for (const std::string dim : {"dp", "tp"}) {
    const int64_t measured = all_to_all_bytes(muon, dim) - all_to_all_bytes(adamw, dim);
    std::printf("[muon] rank 0's exchanges over %s: %lld B a step predicted, %lld measured\n",
                dim.c_str(), static_cast<long long>(predicted.at(dim)),
                static_cast<long long>(measured));
    EXPECT_GT(measured, 0) << dim;
    EXPECT_EQ(predicted.at(dim), measured) << dim;
  }
  // 4 blocks: q, k, v and c_proj 16 x 16, c_fc 64 x 16 and c_proj 16 x 64, 5 iterations each.
  const double ns =
      4 * (4 * 5 * (6.0 * 16 * 16 * 16) + 2 * 5 * (4.0 * 16 * 16 * 64 + 2.0 * 16 * 16 * 16));
  EXPECT_DOUBLE_EQ(muon_flops_per_step(config), ns);
  double model = 0;
  for (const Layer& l : lm.layers)
    model += l.flops_per_sample * static_cast<double>(config.global_batch_size);
  // mfu = flops a step x steps / seconds / (peak x ranks), tokens_per_s = tokens a step x steps
  // / seconds: their ratio gives the flops counted a step.
  const double tokens_per_step = static_cast<double>(config.global_batch_size * config.seq_len);
  const double peak = config.peak_flops;
  const auto counted = [tokens_per_step, peak](const nlohmann::json& m) {
    return m.at("mfu").get<double>() * peak * 4.0 * tokens_per_step /
           m.at("tokens_per_s").get<double>();
  };
  EXPECT_NEAR(counted(adamw) / model, 1.0, 1e-9);
  EXPECT_NEAR(counted(muon) / (model + ns), 1.0, 1e-9);
}

}  // namespace
}  // namespace vescale
