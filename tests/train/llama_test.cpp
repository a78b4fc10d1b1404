// The llama family end to end on threads-as-ranks (float64): every step's loss and the
// parameters after 5 AdamW steps against the 1-process run within 1e-10, under tensor and
// sequence parallelism with grouped-query heads sharded or gathered, pipelines with every
// schedule, ZeRO, and checkpoints moved between layouts.
#include <gtest/gtest.h>

#include "support/training_runs.h"

namespace vescale {
namespace {

using testing::expect_matches;
using testing::RunOutput;
using testing::train;
const std::string& kLlama = testing::kLlamaRun;

const RunOutput& reference() {
  static const RunOutput ref = train(kLlama, {});
  return ref;
}

TEST(Llama, Tp2SequenceParallel) {
  expect_matches(train(kLlama, {"parallel.tp=2", "parallel.plan=\"llama/megatron-sp\""}),
                 reference(), "llama tp2 megatron-sp");
  expect_matches(train(kLlama, {"parallel.tp=2", "parallel.plan=\"llama/megatron-tp\""}),
                 reference(), "llama tp2 megatron-tp");
}

TEST(Llama, Tp4WithTwoKeyValueHeadsGathered) {
  // 2 key/value heads over 4 ranks: k and v are gathered, q stays head-sharded.
  expect_matches(train(kLlama, {"parallel.tp=4", "parallel.plan=\"llama/megatron-sp\""}),
                 reference(), "llama tp4 megatron-sp, n_kv_head 2");
}

TEST(Llama, TiedEmbeddingsAndOneKeyValueHead) {
  const std::vector<std::string> model{"model.tie_embeddings=true", "model.n_kv_head=1"};
  const RunOutput ref = train(kLlama, model);
  std::vector<std::string> tp2 = model;
  tp2.insert(tp2.end(), {"parallel.tp=2", "parallel.plan=\"llama/megatron-tp\""});
  expect_matches(train(kLlama, tp2), ref, "llama tied, 1 kv head, tp2");
}

TEST(Llama, Pp2Dp2Tp2) {
  expect_matches(train(kLlama, {"parallel.pp=2", "parallel.dp=2", "parallel.tp=2",
                                "parallel.plan=\"llama/megatron-sp\""}),
                 reference(), "llama pp2 x dp2 x tp2 (1f1b)");
  expect_matches(
      train(kLlama, {"parallel.pp=2", "parallel.pp_schedule=\"zbv\"", "parallel.pp_virtual=2"}),
      reference(), "llama pp2 zbv");
}

TEST(Llama, Dp2Zero3) {
  expect_matches(train(kLlama, {"parallel.dp=2", "parallel.zero=3"}), reference(),
                 "llama dp2 zero 3");
}

TEST(Llama, CheckpointsMoveBetweenLayouts) {
  // A constant learning rate: the first run's 3 steps are the schedule's first 3 of 5.
  const std::string constant = "lr_scheduler.decay=\"constant\"";
  const RunOutput ref = train(kLlama, {constant});
  const std::vector<std::string> tp2{"parallel.tp=2", "parallel.plan=\"llama/megatron-sp\""};
  const std::vector<std::string> pp2_dp2{"parallel.pp=2", "parallel.dp=2", "parallel.zero=3"};
  expect_matches(testing::resume_across(kLlama, tp2, "sharded", pp2_dp2, {constant}), ref,
                 "llama tp2 sharded -> pp2 x dp2 zero 3");
  expect_matches(testing::resume_across(kLlama, pp2_dp2, "merged", tp2, {constant}), ref,
                 "llama pp2 x dp2 zero 3 merged -> tp2");
}

}  // namespace
}  // namespace vescale
