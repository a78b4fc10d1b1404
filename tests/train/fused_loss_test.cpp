// The fused LM head and loss (training.fused_loss, NOTE [Fused LM loss]) against the unfused
// logits-then-cross-entropy it replaces: whole float64 runs, every step's loss and every
// parameter after 5 AdamW steps within 1e-12, on 1 process and under vocab-parallel tp (a rank
// holding only vocabulary padding among them), sequence parallelism, pipeline and context
// parallelism, for GPT (the head tied to the embedding) and Llama (its own head).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/training_runs.h"

namespace vescale {
namespace {

void expect_fused_loss_matches_unfused(const std::string& toml,
                                       const std::vector<std::string>& layout,
                                       const std::string& label) {
  testing::expect_switch_matches(toml, layout, "training.fused_loss", label, 1e-12);
}

TEST(FusedLoss, OneProcess) {
  expect_fused_loss_matches_unfused(testing::kGptRun, {}, "GPT 1 process");
  expect_fused_loss_matches_unfused(testing::kLlamaRun, {}, "Llama 1 process");
}

TEST(FusedLoss, VocabParallel) {
  expect_fused_loss_matches_unfused(testing::kGptRun,
                                    {"parallel.tp=2", "parallel.plan=\"gpt/megatron-tp\""},
                                    "GPT tp2 megatron-tp");
  expect_fused_loss_matches_unfused(testing::kLlamaRun,
                                    {"parallel.tp=2", "parallel.plan=\"llama/megatron-sp\""},
                                    "Llama tp2 megatron-sp");
  // Vocab 40 padded to 64 at tp 4: rank 2 holds rows 32..47 (8 real), rank 3 only padding.
  expect_fused_loss_matches_unfused(
      testing::kGptRun,
      {"model.vocab_size=40", "parallel.tp=4", "parallel.plan=\"gpt/megatron-sp\""},
      "GPT tp4 megatron-sp, vocab 40 padded to 64");
}

TEST(FusedLoss, PipelineAndContextParallel) {
  expect_fused_loss_matches_unfused(testing::kGptRun, {"parallel.pp=2"}, "GPT pp2");
  expect_fused_loss_matches_unfused(
      testing::kGptRun, {"parallel.cp=2", "training.seq_len=64", "model.block_size=64"}, "GPT cp2");
  expect_fused_loss_matches_unfused(testing::kGptRun, {"parallel.dp=2", "parallel.zero=3"},
                                    "GPT dp2 ZeRO-3");
}

}  // namespace
}  // namespace vescale
