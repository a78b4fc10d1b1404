// What expert parallelism's all-to-alls send per step, from the config alone (config/
// expert_volume.h): by hand for a small case, and per call the bytes dispatch_to_experts counts
// for balanced routing.
#include "config/expert_volume.h"

#include <gtest/gtest.h>

#include "dtensor/expert_dispatch.h"
#include "support/training_runs.h"

namespace vescale {
namespace {

JobConfig mixtral(std::vector<std::string> overrides) {
  return JobConfig::parse(testing::kMixtralRun, "expert_volume_test.toml", overrides);
}

TEST(ExpertVolume, ByHandAndAsDispatchCountsIt) {
  // 4 layers of 4 experts, 2 per token, C = 32 in float64; dp = 4 of 8 sequences of 16 tokens
  // in 1 micro-batch: a rank's T = 2 x 16 tokens route 64 rows of 256 B per layer.
  const ExpertVolume v =
      expert_volume(mixtral({"parallel.dp=4", "parallel.ep=2", "parallel.microbatches=1"}));
  EXPECT_EQ(v.row_bytes, 32.0 * 8);
  EXPECT_EQ(v.routed_rows, 2.0 * 16 * 2);
  EXPECT_EQ(v.count_bytes, 4.0 * 8);
  EXPECT_EQ(v.row_exchanges, 4.0);
  EXPECT_EQ(v.count_exchanges, 1.0);
  EXPECT_EQ(v.calls, 4.0);
  // 4 calls x (ep - 1) / ep of (4 x 64 rows x 256 B + 32 B of counts).
  EXPECT_EQ(v.send_bytes_per_step, 4.0 * 0.5 * (4 * 64 * 256 + 32));
  // The forward's share per call is what dispatch_to_experts counts for each rank when every
  // rank sends each expert as many rows.
  const auto per_expert = static_cast<int64_t>(v.routed_rows / 4);
  const std::vector<std::vector<int64_t>> balanced(2, std::vector<int64_t>(4, per_expert));
  const std::vector<int64_t> counted =
      expert_dispatch_bytes(balanced, static_cast<int64_t>(v.row_bytes));
  for (const int64_t bytes : counted)
    EXPECT_EQ(static_cast<double>(bytes), 0.5 * (2 * v.routed_rows * v.row_bytes + v.count_bytes));

  // Full recompute reruns the forward's three all-to-alls; pp = 2 holds half the layers; ep = 4
  // sends 3 / 4 of each buffer.
  const ExpertVolume full =
      expert_volume(mixtral({"parallel.dp=4", "parallel.ep=2", "parallel.microbatches=1",
                             "training.activation_checkpoint=\"full\""}));
  EXPECT_EQ(full.send_bytes_per_step, 4.0 * 0.5 * (6 * 64 * 256 + 2 * 32));
  const ExpertVolume staged = expert_volume(
      mixtral({"parallel.pp=2", "parallel.dp=2", "parallel.ep=2", "parallel.microbatches=2"}));
  EXPECT_EQ(staged.calls, 2.0 * 2);
  EXPECT_EQ(staged.routed_rows, 2.0 * 16 * 2);  // 8 / 2 / 2 sequences per micro-batch
  const ExpertVolume four =
      expert_volume(mixtral({"parallel.dp=4", "parallel.ep=4", "parallel.microbatches=1"}));
  EXPECT_EQ(four.send_bytes_per_step, 4.0 * 0.75 * (4 * 64 * 256 + 32));

  // Nothing at ep = 1, nor for a dense model.
  EXPECT_EQ(
      expert_volume(mixtral({"parallel.dp=4", "parallel.microbatches=2"})).send_bytes_per_step,
      0.0);
  EXPECT_EQ(expert_volume(JobConfig::parse(testing::kGptRun, "gpt.toml", {"parallel.dp=2"}))
                .send_bytes_per_step,
            0.0);
}

}  // namespace
}  // namespace vescale
