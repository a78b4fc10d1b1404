// q/k/v and gate/up as one GEMM each (training.fused_projections, NOTE [Fused projections])
// against one GEMM per projection: whole float64 runs, every step's loss and every parameter
// after 5 AdamW steps within 1e-12, on 1 process, under column-parallel tp (GPT's and Llama's
// plans, Llama with grouped-query k/v of other sizes than q), pipeline, ZeRO-3, context
// parallelism and full recompute. The checkpoints the runs write have the same parameter names.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/training_runs.h"

namespace vescale {
namespace {

void expect_fused_projections_match_unfused(const std::string& toml,
                                            const std::vector<std::string>& layout,
                                            const std::string& label) {
  testing::expect_switch_matches(toml, layout, "training.fused_projections", label, 1e-12);
}

TEST(FusedProjections, OneProcessAndTensorParallel) {
  expect_fused_projections_match_unfused(testing::kGptRun, {}, "GPT 1 process");
  expect_fused_projections_match_unfused(testing::kLlamaRun, {}, "Llama 1 process");
  expect_fused_projections_match_unfused(testing::kGptRun,
                                         {"parallel.tp=2", "parallel.plan=\"gpt/megatron-sp\""},
                                         "GPT tp2 megatron-sp");
  expect_fused_projections_match_unfused(testing::kLlamaRun,
                                         {"parallel.tp=2", "parallel.plan=\"llama/megatron-tp\""},
                                         "Llama tp2 megatron-tp");
}

TEST(FusedProjections, PipelineZeroContextParallelAndRecompute) {
  expect_fused_projections_match_unfused(testing::kGptRun, {"parallel.pp=2"}, "GPT pp2");
  expect_fused_projections_match_unfused(testing::kLlamaRun, {"parallel.dp=2", "parallel.zero=3"},
                                         "Llama dp2 ZeRO-3");
  expect_fused_projections_match_unfused(
      testing::kGptRun, {"parallel.cp=2", "training.seq_len=64", "model.block_size=64"}, "GPT cp2");
  expect_fused_projections_match_unfused(
      testing::kLlamaRun, {"training.activation_checkpoint=\"full\""}, "Llama full recompute");
}

}  // namespace
}  // namespace vescale
