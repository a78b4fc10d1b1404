// NOTE [Muon]: the Newton-Schulz orthogonalization, and Muon's float64 runs on every layout
// against the 1-process run (losses and every parameter after 5 steps), across a resume, and
// the model without hidden matrices that AdamW updates whole.
#include "optim/muon.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "support/training_runs.h"

namespace vescale {
namespace {

using testing::expect_matches;
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
}

}  // namespace
}  // namespace vescale
