// Rank 0's training state in the metrics, by kind, measured from tensor sizes: parameters,
// gradients and optimizer state of the MLP (64 -> 256 -> 64, float64) on 1 process and on tp=2;
// the bytes each step sends by mesh dim and collective kind, in the JSON and the console line.
#include "train/metrics.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "config/job_config.h"
#include "support/run_ranks.h"
#include "train/trainer.h"

namespace vescale {
namespace {

constexpr const char* kMetricsMlp = R"(
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

/// The metrics.jsonl lines of a run.
std::vector<nlohmann::json> metrics_lines(const std::vector<std::string>& layout) {
  const std::string folder =
      (std::filesystem::temp_directory_path() /
       ("vescale-metrics-" + std::to_string(::getpid()) + "-" + std::to_string(layout.size())))
          .string();
  std::vector<std::string> overrides = layout;
  overrides.push_back("job.dump_folder=\"" + folder + "\"");
  const JobConfig config = JobConfig::parse(kMetricsMlp, "metrics_test.toml", overrides);
  testing::run_ranks(static_cast<int>(config.world_size()),
                     [&](const comm::Group& world) { run_training(config, world); });
  std::ifstream in(folder + "/metrics.jsonl");
  std::vector<nlohmann::json> lines;
  std::string line;
  while (std::getline(in, line))
    lines.push_back(nlohmann::json::parse(line));
  std::filesystem::remove_all(folder);
  return lines;
}

/// The state_bytes of the last metrics.jsonl line of a run.
nlohmann::json last_state_bytes(const std::vector<std::string>& layout) {
  return metrics_lines(layout).back().at("state_bytes");
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

TEST(Metrics, CommBytesByKindBetweenSnapshots) {
  using comm::CommKind;
  const comm::CommSnapshot before = {{{"dp", CommKind::kAllReduce}, {1, 100}},
                                     {{"tp", CommKind::kAllGather}, {1, 10}}};
  const comm::CommSnapshot after = {{{"dp", CommKind::kAllReduce}, {2, 300}},
                                    {{"dp", CommKind::kReduceScatter}, {1, 50 << 10}},
                                    {{"tp", CommKind::kAllGather}, {1, 10}},
                                    {{"world", CommKind::kBroadcast}, {1, 4096}}};
  StepMetrics m;
  set_comm_bytes(m, before, after);
  EXPECT_EQ(m.comm_bytes, (std::map<std::string, int64_t>{{"dp", 200 + (50 << 10)}, {"tp", 0}}));
  const CommBytesByKind by_kind = {{"dp", {{"all_reduce", 200}, {"reduce_scatter", 50 << 10}}}};
  EXPECT_EQ(m.comm_bytes_by_kind, by_kind);

  const std::string json = metrics_json(m);
  EXPECT_NE(json.find(R"("comm_bytes_by_kind":{"dp":{"all_reduce":200,"reduce_scatter":51200}})"),
            std::string::npos)
      << json;
  const std::string line = format_metrics_line(m);
  EXPECT_NE(line.find("| comm 50.2KiB/step (dp: ar 200B, rs 50KiB) |"), std::string::npos) << line;
}

// DESIGN.md §18: host RSS says so; on a GPU the line and the JSON carry the allocator's peaks.
TEST(Metrics, HostMemoryIsLabelledAndGpuPeaksAppearOnlyOnAGpu) {
  StepMetrics m;
  m.mem_bytes = int64_t{3} << 29;
  m.state_bytes = {{"params", 1024}, {"activations", 2048}};
  const std::string cpu_line = format_metrics_line(m);
  EXPECT_NE(cpu_line.find("| mem host 1.5GiB (params 1KiB, activations 2KiB) |"), std::string::npos)
      << cpu_line;
  EXPECT_EQ(cpu_line.find("gpu"), std::string::npos) << cpu_line;
  EXPECT_FALSE(nlohmann::json::parse(metrics_json(m)).contains("gpu_mem"));

  m.gpu_mem = GpuMemory{int64_t{5} << 30, int64_t{6} << 30, int64_t{9} << 30, int64_t{12} << 30};
  const std::string gpu_line = format_metrics_line(m);
  EXPECT_NE(gpu_line.find("| mem host 1.5GiB, gpu 9GiB peak (12GiB reserved) (params 1KiB"),
            std::string::npos)
      << gpu_line;
  const nlohmann::json j = nlohmann::json::parse(metrics_json(m));
  EXPECT_EQ(j["gpu_mem"]["allocated_peak"], int64_t{9} << 30);
  EXPECT_EQ(j["gpu_mem"]["reserved_peak"], int64_t{12} << 30);
  EXPECT_EQ(j["mem_bytes"], int64_t{3} << 29);
}

// The console line's tokens/s with a comma before each group of three digits.
TEST(Metrics, TokensPerSecondHaveThousandsCommas) {
  StepMetrics m;
  for (const auto& [value, text] :
       std::vector<std::pair<double, std::string>>{{0, "| tok/s 0 |"},
                                                   {999.4, "| tok/s 999 |"},
                                                   {1000, "| tok/s 1,000 |"},
                                                   {5395.2, "| tok/s 5,395 |"},
                                                   {123456, "| tok/s 123,456 |"},
                                                   {1234567.8, "| tok/s 1,234,568 |"}}) {
    m.tokens_per_s = value;
    const std::string line = format_metrics_line(m);
    EXPECT_NE(line.find(text), std::string::npos) << line;
  }
}

TEST(Metrics, TheLastStepSaysDoneNotAnEta) {
  StepMetrics m;
  m.step = 9;
  m.total_steps = 10;
  m.eta_s = 2.5;
  EXPECT_NE(format_metrics_line(m).find("| eta 2.5s"), std::string::npos) << format_metrics_line(m);
  m.step = 10;
  m.eta_s = 0;
  const std::string last = format_metrics_line(m);
  EXPECT_EQ(last.substr(last.size() - 7), " | done") << last;
  EXPECT_EQ(last.find("eta"), std::string::npos) << last;
}

TEST(Metrics, NoDpBytesNoBrackets) {
  StepMetrics m;
  m.comm_bytes = {{"tp", 1024}};
  m.comm_bytes_by_kind = {{"tp", {{"all_reduce", 1024}}}};
  EXPECT_NE(format_metrics_line(m).find("| comm 1KiB/step | fwd"), std::string::npos);
  EXPECT_NE(metrics_json(m).find(R"("comm_bytes_by_kind":{"tp":{"all_reduce":1024}})"),
            std::string::npos);
}

TEST(Metrics, TheStepsPhasesAndWaitsSumToItsTime) {
  // NOTE [Step anatomy]: the phases, the rest as other, no bubble without a pipeline.
  StepMetrics m;
  m.step_time_s = 0.050;
  m.time = {0.012, 0.020, 0.0, 0.001, 0.003};
  m.comm_wait_s = {{"dp", 0.001}, {"tp", 0.004}};
  const std::string line = format_metrics_line(m);
  EXPECT_NE(line.find("| fwd 12ms bwd 20ms sync 1ms opt 3ms other 14ms (blocked: dp 1ms, tp 4ms)"),
            std::string::npos)
      << line;
  const nlohmann::json j = nlohmann::json::parse(metrics_json(m));
  double sum = 0;
  for (const auto& [phase, seconds] : j.at("time_s").items())
    sum += seconds.get<double>();
  EXPECT_NEAR(sum, 0.050, 1e-12);
  EXPECT_EQ(j.at("time_s").at("bubble").get<double>(), 0.0);
  EXPECT_EQ(j.at("comm_wait_s").at("tp").get<double>(), 0.004);
  m.time.bubble_s = 0.010;
  EXPECT_NE(format_metrics_line(m).find("bwd 20ms bubble 10ms sync"), std::string::npos);
}

TEST(Metrics, DpAllReduceBytesOfATrainingStep) {
  // The MLP's gradients on dp=2: one all-reduce of all of them per step, 2·(n-1)·S/n bytes
  // (NOTE [Communication volume]); the loss's all-reduce of one double adds 8. The last step's
  // line too: not the evaluation's all-reduces after it.
  const int64_t grads = (256 * 64 + 256 + 64 * 256 + 64) * 8;
  const nlohmann::json metrics = metrics_lines({"parallel.dp=2"}).back();
  std::printf("dp=2, rank 0: comm_bytes_by_kind %s\n",
              metrics.at("comm_bytes_by_kind").dump().c_str());
  const nlohmann::json& dp = metrics.at("comm_bytes_by_kind").at("dp");
  EXPECT_EQ(dp.at("all_reduce").get<int64_t>(), grads + 8);
  EXPECT_EQ(dp.size(), 1u) << dp.dump();
  EXPECT_EQ(metrics.at("comm_bytes").at("dp").get<int64_t>(), grads + 8);
}

}  // namespace
}  // namespace vescale
