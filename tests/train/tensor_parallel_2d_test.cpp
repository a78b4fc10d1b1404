// A 2-D tp mesh from a job config (parallel.tp_shape = [tp_a, tp_b], veScale's nD tensor
// parallelism) with the zoo's gpt/megatron-tp-2d plan: whole float64 runs against 1 process, and
// checkpoints that move between the 2-D mesh and 1-D layouts.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/training_runs.h"

namespace vescale {
namespace {

using testing::expect_matches;
using testing::kGptRun;  // vocab 64 padded to a multiple of 16 x tp: 64
using testing::RunOutput;
using testing::train;

const std::vector<std::string> kTp2x2{"parallel.tp=4", "parallel.tp_shape=[2, 2]",
                                      "parallel.plan=\"gpt/megatron-tp-2d\""};

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(TensorParallel2d, MatchesOneProcess) {
  const RunOutput ref = train(kGptRun, {});
  expect_matches(train(kGptRun, kTp2x2), ref, "GPT tp_shape [2, 2] megatron-tp-2d");
  expect_matches(train(kGptRun, with(kTp2x2, {"parallel.dp=2", "parallel.microbatches=2"})), ref,
                 "GPT DP2 x tp_shape [2, 2]");
  expect_matches(train(kGptRun, {"parallel.tp=2", "parallel.tp_shape=[1, 2]",
                                 "parallel.plan=\"gpt/megatron-tp-2d\""}),
                 ref, "GPT tp_shape [1, 2]");
}

TEST(TensorParallel2d, CheckpointsMoveToAndFromOneDimensionalLayouts) {
  const std::string constant = "lr_scheduler.decay=\"constant\"";
  const RunOutput ref = train(kGptRun, {constant});
  const std::vector<std::string> tp2{"parallel.tp=2", "parallel.plan=\"gpt/megatron-sp\""};
  expect_matches(testing::resume_across(kGptRun, kTp2x2, "sharded", tp2, {constant}), ref,
                 "tp_shape [2, 2] sharded -> TP2 megatron-sp");
  expect_matches(testing::resume_across(kGptRun, {}, "merged", kTp2x2, {constant}), ref,
                 "1 process merged -> tp_shape [2, 2]");
}

}  // namespace
}  // namespace vescale
