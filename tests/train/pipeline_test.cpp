// Pipeline parallelism end to end on threads-as-ranks: whole training runs (run_training) under
// every schedule and with TP and DP inside the stages, against the 1-process run, float64: the
// loss of every step and every parameter after 5 AdamW steps (read back from the merged
// checkpoint each run writes at its end).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "support/training_runs.h"

namespace vescale {
namespace {

using testing::expect_matches;
using testing::fresh_folder;
using testing::kGptRun;
using testing::RunOutput;
using testing::train;
using testing::train_in;
const std::string& kPipelineMlp = testing::kMlpRun;

const RunOutput& pipeline_gpt_reference() {
  static const RunOutput ref = train(kGptRun, {});
  return ref;
}

TEST(Pipeline, GptEverySchedule) {
  expect_matches(train(kGptRun, {"parallel.pp=2", "parallel.pp_schedule=\"1f1b\""}),
                 pipeline_gpt_reference(), "GPT PP2 1f1b");
  expect_matches(train(kGptRun, {"parallel.pp=2", "parallel.pp_schedule=\"gpipe\""}),
                 pipeline_gpt_reference(), "GPT PP2 gpipe");
  expect_matches(train(kGptRun, {"parallel.pp=2", "parallel.pp_schedule=\"interleaved-1f1b\"",
                                 "parallel.pp_virtual=2"}),
                 pipeline_gpt_reference(), "GPT PP2 x virtual 2 interleaved-1f1b");
  expect_matches(
      train(kGptRun, {"parallel.pp=2", "parallel.pp_schedule=\"zbv\"", "parallel.pp_virtual=2"}),
      pipeline_gpt_reference(), "GPT PP2 zbv");
  expect_matches(train(kGptRun, {"parallel.pp=2", "parallel.pp_split=[\"transformer.h.2\"]"}),
                 pipeline_gpt_reference(), "GPT PP2 1f1b split at transformer.h.2");
  expect_matches(train(kGptRun, {"parallel.pp=2", "parallel.pp_schedule=\"zb-h1\""}),
                 pipeline_gpt_reference(), "GPT PP2 zb-h1");
}

TEST(Pipeline, GptPp4AndUnevenAndEightMicroBatches) {
  expect_matches(train(kGptRun, {"parallel.pp=4"}), pipeline_gpt_reference(), "GPT PP4 1f1b");
  expect_matches(train(kGptRun, {"parallel.pp=2", "parallel.microbatches=8"}),
                 pipeline_gpt_reference(), "GPT PP2 1f1b, 8 micro-batches");
  const RunOutput three_blocks = train(kGptRun, {"model.n_layer=3"});
  expect_matches(train(kGptRun, {"model.n_layer=3", "parallel.pp=2"}), three_blocks,
                 "GPT PP2, 3 blocks");
}

TEST(Pipeline, GptWithTensorAndDataParallelInsideStages) {
  expect_matches(
      train(kGptRun, {"parallel.pp=2", "parallel.tp=2", "parallel.plan=\"gpt/megatron-sp\""}),
      pipeline_gpt_reference(), "GPT PP2 x TP2 megatron-sp");
  expect_matches(train(kGptRun, {"parallel.pp=2", "parallel.dp=2"}), pipeline_gpt_reference(),
                 "GPT PP2 x DP2");
  expect_matches(train(kGptRun, {"parallel.pp=2", "parallel.dp=2", "parallel.tp=2",
                                 "parallel.plan=\"gpt/megatron-sp\""}),
                 pipeline_gpt_reference(), "GPT PP2 x DP2 x TP2 megatron-sp");
}

TEST(Pipeline, Mlp) {
  const RunOutput ref = train(kPipelineMlp, {});
  expect_matches(train(kPipelineMlp, {"parallel.pp=2"}), ref, "MLP PP2 1f1b");
  expect_matches(train(kPipelineMlp,
                       {"parallel.pp=2", "parallel.pp_schedule=\"zbv\"", "parallel.pp_virtual=2"}),
                 ref, "MLP PP2 zbv");
}

TEST(Pipeline, CheckpointsMoveBetweenPipelineDegrees) {
  // 3 steps in one layout and format, then steps 4-5 resumed in another: the curve and the
  // parameters of 5 uninterrupted steps on 1 process (constant LR: the schedule's length differs).
  const std::string constant = "lr_scheduler.decay=\"constant\"";
  const RunOutput ref = train(kGptRun, {constant});
  const std::vector<std::string> three_d{"parallel.pp=2", "parallel.dp=2", "parallel.tp=2",
                                         "parallel.plan=\"gpt/megatron-sp\""};
  struct Case {
    std::vector<std::string> from;
    std::string format;
    std::vector<std::string> to;
    std::string label;
  };
  const std::vector<Case> cases{
      {three_d, "sharded", {}, "PP2xDP2xTP2 sharded -> 1 process"},
      {three_d,
       "deduped",
       {"parallel.tp=4", "parallel.plan=\"gpt/megatron-tp\""},
       "PP2xDP2xTP2 deduped -> TP4"},
      {three_d, "merged", {"parallel.pp=4"}, "PP2xDP2xTP2 merged -> PP4"},
      {{}, "sharded", {"parallel.pp=2"}, "1 process sharded -> PP2"},
      {{"parallel.pp=2", "parallel.pp_schedule=\"zbv\"", "parallel.pp_virtual=2"},
       "deduped",
       {"parallel.pp=2", "parallel.dp=2"},
       "PP2 zbv deduped -> PP2xDP2"},
  };
  for (const Case& c : cases)
    expect_matches(testing::resume_across(kGptRun, c.from, c.format, c.to, {constant}), ref,
                   c.label);
}

TEST(Pipeline, Float32CurvesStayWithin1e4) {
  // The user's default precision: 20 steps of PP2 x DP2 x TP2 (1f1b) and PP2 zbv against 1 process.
  const std::vector<std::string> f32{"training.dtype=\"float32\"", "training.steps=20",
                                     "checkpoint.interval=0"};
  const RunOutput ref = train(kGptRun, f32);
  for (const auto& [layout, label] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"parallel.pp=2", "parallel.dp=2", "parallel.tp=2",
             "parallel.plan=\"gpt/megatron-sp\""},
            "float32 PP2 x DP2 x TP2, 20 steps"},
           {{"parallel.pp=2", "parallel.pp_schedule=\"zbv\"", "parallel.pp_virtual=2"},
            "float32 PP2 zbv, 20 steps"}}) {
    std::vector<std::string> overrides = f32;
    overrides.insert(overrides.end(), layout.begin(), layout.end());
    testing::expect_curves_close(train(kGptRun, overrides), ref, label, 1e-4);
  }
}

}  // namespace
}  // namespace vescale
