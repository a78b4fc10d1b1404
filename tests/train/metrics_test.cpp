// Rank 0's training state in the metrics, by kind, measured from tensor sizes: parameters,
// gradients and optimizer state of the MLP (64 -> 256 -> 64, float64) on 1 process and on tp=2.
#include "train/metrics.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "config/job_config.h"
#include "support/run_ranks.h"
#include "train/trainer.h"

namespace vescale {
namespace {

constexpr const char* kMlp = R"(
[model]
name = "mlp"
d_in = 64
d_hidden = 256
d_out = 64
[training]
steps = 2
global_batch_size = 8
dtype = "float64"
[eval]
interval = 0
windows = 1
[metrics]
log_interval = 1
peak_flops = 1e12
)";

/// The state_bytes of the last metrics.jsonl line of a run.
nlohmann::json last_state_bytes(const std::vector<std::string>& layout) {
  const std::string folder =
      (std::filesystem::temp_directory_path() /
       ("vescale-metrics-" + std::to_string(::getpid()) + "-" + std::to_string(layout.size())))
          .string();
  std::vector<std::string> overrides = layout;
  overrides.push_back("job.dump_folder=\"" + folder + "\"");
  const JobConfig config = JobConfig::parse(kMlp, "metrics_test.toml", overrides);
  testing::run_ranks(static_cast<int>(config.world_size()),
                     [&](const comm::Group& world) { run_training(config, world); });
  std::ifstream in(folder + "/metrics.jsonl");
  std::string line, last;
  while (std::getline(in, line))
    last = line;
  std::filesystem::remove_all(folder);
  return nlohmann::json::parse(last).at("state_bytes");
}

TEST(Metrics, StateBytesByKindFromTensorSizes) {
  // fc1: 256 x 64 + 256, fc2: 64 x 256 + 64 parameters, 8 bytes each.
  const int64_t whole = (256 * 64 + 256 + 64 * 256 + 64) * 8;
  const nlohmann::json one = last_state_bytes({});
  std::printf("1 process: %s\n", one.dump().c_str());
  EXPECT_EQ(one.at("params").get<int64_t>(), whole);
  EXPECT_EQ(one.at("grads").get<int64_t>(), whole);
  EXPECT_EQ(one.at("optimizer").get<int64_t>(), 2 * whole);  // AdamW: exp_avg, exp_avg_sq

  // mlp/tp on tp=2: fc1 S(0) (weight and bias), fc2 S(1) weight, fc2.bias replicated.
  const int64_t rank0 = (128 * 64 + 128 + 64 * 128 + 64) * 8;
  const nlohmann::json tp = last_state_bytes({"parallel.tp=2", "parallel.plan=\"mlp/tp\""});
  std::printf("tp=2, rank 0: %s\n", tp.dump().c_str());
  EXPECT_EQ(tp.at("params").get<int64_t>(), rank0);
  EXPECT_EQ(tp.at("grads").get<int64_t>(), rank0);
  EXPECT_EQ(tp.at("optimizer").get<int64_t>(), 2 * rank0);
}

}  // namespace
}  // namespace vescale
