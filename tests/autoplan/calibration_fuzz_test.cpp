// Issue [26] item 4: seeded fuzzing of plan auto's calibration files (MachineFacts::from_json,
// what `plan auto` reads from its cache and `comm bench --calibrate` writes). Each mutated file
// must be refused by name, or give facts every prediction can use: finite, positive rates and
// non-negative times, groups of two ranks or more.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "autoplan/machine_facts.h"
#include "support/fuzz.h"
#include "support/mutate.h"

namespace vescale::autoplan {
namespace {

MachineFacts measured_looking_facts() {
  MachineFacts f;
  f.nproc = 4;
  f.host = "h";
  f.cores = 2;
  f.threads = "1 intra-op thread per rank";
  f.compute.gemm = {{1e6, 2e10}, {1e8, 4e10}, {1e9, 5e10}};
  f.compute.op_overhead_s = 5e-6;
  f.compute.block_overhead_s = 1e-4;
  f.compute.model_overhead_s = 3e-4;
  f.compute.block_probe_s = 2e-3;
  f.compute.stream_bytes_per_s = 1e10;
  for (const char* op : {"all_reduce", "all_gather", "reduce_scatter", "send_recv"}) {
    f.comm[op][2] = {1e-4, 5e8};
    f.comm[op][4] = {2e-4, 4e8};
  }
  f.tp_framework["megatron-sp"][2] = {1e-3, 2e-3};
  f.tp_framework["megatron-tp"][4] = {2e-3, 3e-3};
  return f;
}

/// Where accepted facts would mislead a prediction, or "".
std::string unsound(const MachineFacts& f) {
  const auto bad = [](double v) { return !std::isfinite(v) || v < 0; };
  if (f.nproc < 1 || f.cores < 1) return "nproc or cores below 1";
  for (double flops : {1e3, 1e6, 3e7, 1e9, 1e12}) {
    const double rate = f.compute.gemm_rate(flops);
    if (!std::isfinite(rate) || rate <= 0) return "a matmul rate that is not finite and positive";
  }
  const ComputeFacts& c = f.compute;
  for (double v : {c.op_overhead_s, c.block_overhead_s, c.model_overhead_s, c.block_probe_s})
    if (bad(v)) return "a compute time that is not finite and non-negative";
  if (!std::isfinite(c.stream_bytes_per_s) || c.stream_bytes_per_s <= 0)
    return "a stream rate that is not finite and positive";
  for (const auto& [op, sizes] : f.comm) {
    for (const auto& [size, fit] : sizes) {
      if (size < 2) return op + " over a group of fewer than 2 ranks";
      if (bad(fit.alpha_s) || bad(fit.time(1e6)) || bad(fit.time(1e12)))
        return op + ": a time not finite or negative";
    }
  }
  for (const auto& [plan, sizes] : f.tp_framework) {
    for (const auto& [size, t] : sizes)
      if (size < 2 || bad(t.block_s) || bad(t.model_s)) return plan + ": an unusable time";
  }
  return "";
}

TEST(Fuzz, MutatedCalibrationFilesAreRefusedByNameOrSound) {
  const std::string base = nlohmann::json::parse(measured_looking_facts().to_json()).dump(2);
  ASSERT_EQ(unsound(MachineFacts::from_json(base, "calibration.json")), "");
  testing::Mutator mutate(20261126);
  testing::FuzzRun run("calibration");
  for (int i = 0; i < 1200; ++i) {
    const std::string text = mutate.json(base, testing::hostile_json_values());
    run.one(std::to_string(i), text.size(), [&] {
      const MachineFacts f = MachineFacts::from_json(text, "calibration.json");
      EXPECT_EQ(unsound(f), "") << "case " << i << " accepted:\n" << text.substr(0, 4000);
    });
  }
  run.finish(1000, 60);
}

}  // namespace
}  // namespace vescale::autoplan
