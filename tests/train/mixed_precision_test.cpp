// Mixed precision (training.dtype = "bfloat16", docs/design.md §16) on CPU against float32: bf16
// compute with float32 master weights, optimizer state and gradient reductions; 20-step loss curves
// within 2% of float32 under several layouts (a mixture of experts on ep too); checkpoints hold
// float32 state and move between bfloat16 and float32 runs both ways.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "checkpoint/checkpoint.h"
#include "support/training_runs.h"

namespace vescale {
namespace {

using testing::fresh_folder;
using testing::kGptRun;
using testing::RunOutput;
using testing::train;
using testing::train_in;

const std::vector<std::string> kSteps{"training.steps=20", "checkpoint.interval=0",
                                      "parallel.microbatches=2", "lr_scheduler.decay=\"constant\""};

std::vector<std::string> in(const std::string& dtype, std::vector<std::string> more) {
  more.push_back("training.dtype=\"" + dtype + "\"");
  return more;
}

std::vector<std::string> plus(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(MixedPrecision, Bf16CurvesStayWithin2PercentOfFloat32) {
  const RunOutput f32 = train(kGptRun, in("float32", kSteps));
  const std::vector<std::pair<std::vector<std::string>, std::string>> layouts{
      {{}, "bf16 1 process"},
      {{"parallel.dp=2", "parallel.tp=2", "parallel.plan=\"gpt/megatron-sp\""},
       "bf16 DP2 x TP2 megatron-sp"},
      {{"parallel.dp=2", "parallel.zero=2"}, "bf16 DP2 zero 2"},
      {{"parallel.dp=2", "parallel.zero=3"}, "bf16 DP2 zero 3"},
      {{"parallel.pp=2", "parallel.dp=2", "parallel.zero=1"}, "bf16 PP2 x DP2 zero 1"},
  };
  for (const auto& [layout, label] : layouts)
    testing::expect_curves_close(train(kGptRun, in("bfloat16", plus(kSteps, layout))), f32,
                                 label + ", 20 steps vs float32", 0.02);
}

TEST(MixedPrecision, MixtureOfExpertsOnEp2StaysWithin2PercentOfFloat32) {
  // The router in float32 (NOTE [Expert routing]), the experts' rows sent over ep in bf16. At
  // GPT's lr of 0.01 this model memorises the synthetic batches (loss 4.2 -> 0.9 in 20 steps),
  // where bf16's flips of near-tied routes show as large relative errors of a small loss: lr
  // 0.003 keeps the curve in the range a run trains in.
  const std::vector<std::string> steps = plus(kSteps, {"optimizer.lr=0.003"});
  const RunOutput f32 = train(testing::kMixtralRun, in("float32", steps));
  for (const auto& [layout, label] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{}, "mixtral bf16 1 process"},
           {{"parallel.dp=2", "parallel.ep=2"}, "mixtral bf16 ep2"},
           {{"parallel.dp=2", "parallel.ep=2", "parallel.zero=3"}, "mixtral bf16 ep2 zero 3"}}) {
    testing::expect_curves_close(train(testing::kMixtralRun, in("bfloat16", plus(steps, layout))),
                                 f32, label + ", 20 steps vs float32", 0.02);
  }
}

TEST(MixedPrecision, CheckpointsHoldFloat32StateBothWays) {
  const std::vector<std::string> save{
      "training.steps=10",      "checkpoint.interval=5", "checkpoint.format=\"sharded\"",
      "parallel.dp=2",          "parallel.zero=2",       "lr_scheduler.decay=\"constant\"",
      "parallel.microbatches=2"};
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"bfloat16", "float32"}, {"float32", "bfloat16"}}) {
    const std::string folder = fresh_folder("vescale-bf16");
    const RunOutput whole = train_in(folder, kGptRun, in(from, save), /*keep=*/true);
    const std::string step5 = folder + "/checkpoints/step-000005";
    const CheckpointReader reader(step5);
    for (const auto& name : reader.names())
      EXPECT_EQ(reader.dtype(name), at::kFloat) << from << " run: " << name;
    // Steps 6-10 in the other precision from the step-5 state follow the first run's curve.
    const RunOutput resumed =
        train(kGptRun, in(to, plus(save, {"checkpoint.load=\"" + step5 + "\""})));
    std::filesystem::remove_all(folder);
    ASSERT_EQ(resumed.losses.size(), 5u);
    double worst = 0;
    for (size_t s = 0; s < 5; ++s)
      worst = std::max(
          worst, std::abs(resumed.losses[s] - whole.losses[5 + s]) / std::abs(whole.losses[5 + s]));
    std::printf("%-48s loss %.2g (relative)\n", (from + " checkpoint -> " + to).c_str(), worst);
    EXPECT_LE(worst, 0.02) << from << " -> " << to;
  }
}

}  // namespace
}  // namespace vescale
