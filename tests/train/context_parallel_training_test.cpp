// Training with context parallelism (parallel.cp) on threads-as-ranks, float64, at a sequence
// length of 256: every step's loss and the parameters after 5 AdamW steps against the 1-process
// run within 1e-10, for GPT (learned positions, dropout 0.1) and Llama (rotary), under cp alone
// and composed with tp and sequence parallelism, dp, pp, ZeRO over dp x cp and activation
// checkpointing; bf16 curves within 2% of float32; and checkpoints moved between cp degrees and
// one process.
#include <gtest/gtest.h>

#include "support/training_runs.h"

namespace vescale {
namespace {

using testing::expect_matches;
using testing::RunOutput;
using testing::train;
using Overrides = std::vector<std::string>;

/// 256-token sequences: 2 x cp chunks of 32 tokens at cp = 4.
const Overrides kLong{"training.seq_len=256", "model.block_size=256"};

Overrides with(Overrides base, const Overrides& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

Overrides gpt(const Overrides& layout) {
  return with(with(kLong, {"model.dropout=0.1"}), layout);
}
Overrides llama(const Overrides& layout) {
  return with(kLong, layout);
}

const RunOutput& gpt_reference() {
  static const RunOutput ref = train(testing::kGptRun, gpt({}));
  return ref;
}

const RunOutput& llama_reference() {
  static const RunOutput ref = train(testing::kLlamaRun, llama({}));
  return ref;
}

TEST(ContextParallelTraining, GptRings) {
  expect_matches(train(testing::kGptRun, gpt({"parallel.cp=2"})), gpt_reference(), "gpt cp2");
  expect_matches(train(testing::kGptRun, gpt({"parallel.cp=4"})), gpt_reference(), "gpt cp4");
}

TEST(ContextParallelTraining, GptCp2Tp2SequenceParallel) {
  expect_matches(train(testing::kGptRun, gpt({"parallel.cp=2", "parallel.tp=2",
                                              "parallel.plan=\"gpt/megatron-sp\""})),
                 gpt_reference(), "gpt cp2 x tp2 megatron-sp");
}

TEST(ContextParallelTraining, GptDp2Cp2) {
  expect_matches(train(testing::kGptRun, gpt({"parallel.dp=2", "parallel.cp=2"})), gpt_reference(),
                 "gpt dp2 x cp2");
}

TEST(ContextParallelTraining, GptPp2Cp2) {
  expect_matches(train(testing::kGptRun, gpt({"parallel.pp=2", "parallel.cp=2"})), gpt_reference(),
                 "gpt pp2 x cp2 (1f1b)");
  expect_matches(
      train(testing::kGptRun, gpt({"parallel.pp=2", "parallel.cp=2", "parallel.pp_schedule=\"zbv\"",
                                   "parallel.pp_virtual=2"})),
      gpt_reference(), "gpt pp2 x cp2 (zbv)");
}

TEST(ContextParallelTraining, GptZeroOverDpAndCp) {
  // Width 18: the 18 rows of a norm weight chunk over dp 2 then cp 2 as 5, 4, 5, 4, which one
  // chunk over 4 replicas (5, 5, 5, 3) is not (NOTE [ZeRO pieces]).
  const Overrides model{"model.n_embd=18", "model.n_head=3"};
  const RunOutput ref = train(testing::kGptRun, gpt(model));
  for (int stage : {1, 2, 3}) {
    expect_matches(
        train(testing::kGptRun, gpt(with(model, {"parallel.dp=2", "parallel.cp=2",
                                                 "parallel.zero=" + std::to_string(stage)}))),
        ref, "gpt dp2 x cp2 zero " + std::to_string(stage) + ", width 18");
  }
}

TEST(ContextParallelTraining, GptCp2WithActivationCheckpointing) {
  expect_matches(
      train(testing::kGptRun, gpt({"parallel.cp=2", "training.activation_checkpoint=\"full\""})),
      gpt_reference(), "gpt cp2 full recompute");
  expect_matches(train(testing::kGptRun,
                       gpt({"parallel.cp=2", "training.activation_checkpoint=\"selective\""})),
                 gpt_reference(), "gpt cp2 selective recompute");
}

TEST(ContextParallelTraining, Bf16CurvesStayWithin2PercentOfFloat32) {
  // bf16 compute with float32 masters and reductions (the ring sums in float32 too): 20 steps of
  // GPT at T = 256 on cp2 and dp2 x cp2 ZeRO-2, against 1 process in float32.
  const Overrides steps{"training.steps=20", "checkpoint.interval=0",
                        "lr_scheduler.decay=\"constant\""};
  const RunOutput f32 = train(testing::kGptRun, gpt(with(steps, {"training.dtype=\"float32\""})));
  for (const auto& [layout, label] : std::vector<std::pair<Overrides, std::string>>{
           {{"parallel.cp=2"}, "bf16 cp2"},
           {{"parallel.dp=2", "parallel.cp=2", "parallel.zero=2"}, "bf16 dp2 x cp2 zero 2"}}) {
    testing::expect_curves_close(
        train(testing::kGptRun, gpt(with(with(steps, {"training.dtype=\"bfloat16\""}), layout))),
        f32, label + ", 20 steps vs float32", 0.02);
  }
}

TEST(ContextParallelTraining, CheckpointsMoveBetweenCpDegrees) {
  // A constant learning rate: the first run's 3 steps are the schedule's first 3 of 5.
  const std::string constant = "lr_scheduler.decay=\"constant\"";
  const RunOutput ref = train(testing::kGptRun, gpt({constant}));
  expect_matches(testing::resume_across(testing::kGptRun, {"parallel.cp=2"}, "sharded",
                                        {"parallel.cp=4"}, gpt({constant})),
                 ref, "gpt cp2 sharded -> cp4");
  expect_matches(
      testing::resume_across(testing::kGptRun, {"parallel.cp=4"}, "deduped", {}, gpt({constant})),
      ref, "gpt cp4 deduped -> 1 process");
  expect_matches(testing::resume_across(
                     testing::kGptRun, {"parallel.dp=2", "parallel.cp=2", "parallel.zero=3"},
                     "sharded", {"parallel.dp=2", "parallel.zero=1"}, gpt({constant})),
                 ref, "gpt dp2 x cp2 zero 3 sharded -> dp2 zero 1");
}

TEST(ContextParallelTraining, LlamaRings) {
  expect_matches(train(testing::kLlamaRun, llama({"parallel.cp=2"})), llama_reference(),
                 "llama cp2");
  expect_matches(train(testing::kLlamaRun, llama({"parallel.cp=4"})), llama_reference(),
                 "llama cp4");
}

TEST(ContextParallelTraining, LlamaComposed) {
  expect_matches(train(testing::kLlamaRun, llama({"parallel.cp=2", "parallel.tp=2",
                                                  "parallel.plan=\"llama/megatron-sp\""})),
                 llama_reference(), "llama cp2 x tp2 megatron-sp");
  expect_matches(train(testing::kLlamaRun, llama({"parallel.dp=2", "parallel.cp=2"})),
                 llama_reference(), "llama dp2 x cp2");
  expect_matches(train(testing::kLlamaRun, llama({"parallel.pp=2", "parallel.cp=2"})),
                 llama_reference(), "llama pp2 x cp2");
}

}  // namespace
}  // namespace vescale
