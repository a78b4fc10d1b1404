// The vocab-parallel embedding and cross entropy under every padding: a tp degree may leave a
// rank's slice of the padded vocabulary with no real token at all (vocab 64 padded to 96 at tp=3:
// rank 2 holds rows 64..95, all padding). Whole float64 runs against 1 process with the same
// padded vocabulary (vocab_multiple x tp), the loss of every step and every parameter.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <string>

#include "support/training_runs.h"

namespace vescale {
namespace {

using testing::expect_matches;
using testing::kGptRun;
using testing::train;

// Trains `vocab` tokens padded to a multiple of `multiple` x tp under `plan`, and 1 process
// with the same padded vocabulary.
void expect_tp_matches_one_process(int64_t tp, int64_t vocab, int64_t multiple,
                                   const std::string& plan) {
  const int64_t padded = (vocab + multiple * tp - 1) / (multiple * tp) * (multiple * tp);
  const std::string vocab_key = "model.vocab_size=" + std::to_string(vocab);
  const testing::RunOutput one_process =
      train(kGptRun, {vocab_key, "model.vocab_multiple=" + std::to_string(multiple * tp)});
  const testing::RunOutput tp_run =
      train(kGptRun, {vocab_key, "model.vocab_multiple=" + std::to_string(multiple),
                      "parallel.tp=" + std::to_string(tp), "parallel.plan=\"" + plan + "\""});
  expect_matches(tp_run, one_process,
                 fmt::format("GPT TP{} {}, vocab {} padded to {} ({} rows a rank)", tp, plan, vocab,
                             padded, padded / tp));
}

TEST(VocabPadding, Tp3LeavesOneRankOnlyPadding) {
  expect_tp_matches_one_process(3, 64, 16, "gpt/megatron-tp");  // rank 2: rows 64..95
  expect_tp_matches_one_process(3, 64, 16, "gpt/megatron-sp");
}

TEST(VocabPadding, Tp4LeavesTwoRanksOnlyPaddingOrOnePartly) {
  expect_tp_matches_one_process(4, 64, 32, "gpt/megatron-sp");  // ranks 2, 3: rows 64..127
  expect_tp_matches_one_process(4, 40, 16, "gpt/megatron-tp");  // rank 2 partly, rank 3 only
}

}  // namespace
}  // namespace vescale
