// Activation checkpointing on threads-as-ranks (float64; GPT with dropout 0.1, and Llama): the
// losses and every reduced gradient of a step are bitwise those without recompute, full and
// selective, under 1 process, dp2 x tp2 with sequence parallelism, pp2 with 1f1b and zbv, and
// ZeRO-3; whole training runs end on bitwise the same parameters; and what a forward keeps for
// its backward shrinks as the mode says.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <mutex>

#include "core/memory_meter.h"
#include "support/run_ranks.h"
#include "support/tensors.h"
#include "support/training_runs.h"
#include "train/job.h"

namespace vescale {
namespace {

using Overrides = std::vector<std::string>;

JobConfig config_of(const std::string& toml, Overrides overrides) {
  overrides.push_back("job.dump_folder=\"" + testing::fresh_folder("vescale-recompute") + "\"");
  // Llama has no dropout.
  if (toml == testing::kGptRun) overrides.push_back("model.dropout=0.1");
  return JobConfig::parse(toml, "activation_checkpoint_test.toml", overrides);
}

/// One step's micro-batch losses and each parameter's reduced gradient on this rank (as the
/// optimizer would take them), without an update: two steps, so two sets of dropout masks.
struct StepGrads {
  std::vector<double> losses;
  std::vector<at::Tensor> grads;
};

std::vector<StepGrads> step_grads(const JobConfig& config, const comm::Group& world) {
  auto job = build_job(config, world);
  std::vector<StepGrads> out;
  for (int64_t step = 0; step < 2; ++step) {
    StepGrads s;
    job->grad_sync->zero_grad();
    const at::Tensor losses =
        job->schedule().run([&](int64_t micro) { return job->model->micro_batch(step, micro); });
    s.losses = testing::to_vector(losses);
    job->grad_sync->finish();
    for (size_t k = 0; k < job->model->params().size(); ++k)
      s.grads.push_back(job->grad_sync->piece_grad(k).clone());
    out.push_back(std::move(s));
  }
  return out;
}

/// The largest |difference| between the two runs' losses and gradients (0: bitwise equal).
double worst_difference(const std::vector<StepGrads>& a, const std::vector<StepGrads>& b) {
  double worst = 0;
  for (size_t s = 0; s < a.size(); ++s) {
    EXPECT_EQ(a[s].losses.size(), b[s].losses.size());
    for (size_t m = 0; m < a[s].losses.size(); ++m)
      worst = std::max(worst, std::abs(a[s].losses[m] - b[s].losses[m]));
    EXPECT_EQ(a[s].grads.size(), b[s].grads.size());
    for (size_t k = 0; k < a[s].grads.size(); ++k) {
      if (!at::equal(a[s].grads[k], b[s].grads[k]))
        worst = std::max(worst, (a[s].grads[k] - b[s].grads[k]).abs().max().item<double>());
    }
  }
  return worst;
}

/// For each mode, the worst difference over ranks of its step gradients from those without
/// recompute, printed; all must be 0.
void expect_bitwise(const std::string& toml, const Overrides& layout, const std::string& label) {
  const std::vector<Overrides> modes{
      {"training.activation_checkpoint=\"full\""},
      {"training.activation_checkpoint=\"selective\""},
      {"training.activation_checkpoint=\"full\"", "training.activation_checkpoint_every=2"}};
  const JobConfig plain = config_of(toml, layout);
  std::vector<JobConfig> recomputing;
  for (const Overrides& mode : modes) {
    Overrides o = layout;
    o.insert(o.end(), mode.begin(), mode.end());
    recomputing.push_back(config_of(toml, o));
  }
  std::mutex mu;
  std::vector<double> worst(modes.size(), 0.0);
  testing::run_ranks(static_cast<int>(plain.world_size()), [&](const comm::Group& world) {
    const std::vector<StepGrads> reference = step_grads(plain, world);
    for (size_t i = 0; i < modes.size(); ++i) {
      const double w = worst_difference(step_grads(recomputing[i], world), reference);
      std::lock_guard<std::mutex> lock(mu);
      worst[i] = std::max(worst[i], w);
    }
  });
  const char* names[] = {"full", "selective", "full, every 2nd block"};
  for (size_t i = 0; i < modes.size(); ++i) {
    std::printf("%s, %s: worst |difference| of losses and gradients from no recompute = %.3g\n",
                label.c_str(), names[i], worst[i]);
    EXPECT_EQ(worst[i], 0.0) << label << ", " << names[i];
  }
}

TEST(ActivationCheckpoint, OneProcessIsBitwise) {
  expect_bitwise(testing::kGptRun, {}, "1 process");
}

TEST(ActivationCheckpoint, DataTensorSequenceParallelIsBitwise) {
  expect_bitwise(testing::kGptRun,
                 {"parallel.dp=2", "parallel.tp=2", "parallel.plan=\"gpt/megatron-sp\""},
                 "dp2 x tp2 megatron-sp");
}

TEST(ActivationCheckpoint, PipelineSchedulesAreBitwise) {
  expect_bitwise(testing::kGptRun, {"parallel.pp=2"}, "pp2 1f1b");
  // Zero bubble: the I half recomputes for the activations' gradient, the W half for the
  // weights'.
  expect_bitwise(testing::kGptRun,
                 {"parallel.pp=2", "parallel.pp_schedule=\"zbv\"", "parallel.pp_virtual=2"},
                 "pp2 zbv");
}

TEST(ActivationCheckpoint, Zero3RegathersForTheRecomputeAndIsBitwise) {
  expect_bitwise(testing::kGptRun, {"parallel.dp=2", "parallel.zero=3"}, "dp2 zero 3");
}

TEST(ActivationCheckpoint, LlamaIsBitwise) {
  expect_bitwise(testing::kLlamaRun, {"parallel.tp=2", "parallel.plan=\"llama/megatron-sp\""},
                 "llama tp2 megatron-sp");
}

TEST(ActivationCheckpoint, WholeRunsEndOnTheSameParameters) {
  const Overrides layout{"parallel.dp=2", "parallel.tp=2", "parallel.plan=\"gpt/megatron-sp\"",
                         "model.dropout=0.1"};
  Overrides full = layout;
  full.push_back("training.activation_checkpoint=\"full\"");
  testing::expect_matches(testing::train(testing::kGptRun, full),
                          testing::train(testing::kGptRun, layout),
                          "5 AdamW steps, dp2 x tp2 sp, full recompute", 0.0);
}

/// Bytes a training forward of one micro-batch keeps for its backward on 1 process (the meter's
/// live bytes after the loss, less before), for a 4-block GPT of width 64 over 64 tokens.
int64_t kept_by_forward(const std::string& mode) {
  const JobConfig config =
      config_of(testing::kGptRun, {"model.n_embd=64", "model.block_size=64", "training.seq_len=64",
                                   "training.activation_checkpoint=\"" + mode + "\""});
  int64_t kept = 0;
  testing::run_ranks(1, [&](const comm::Group& world) {
    ParallelModel model(config, world, JobPurpose::kTrain);
    const Batch batch = model.micro_batch(0, 0);
    const int64_t before = metered_live_bytes();
    DTensor loss =
        model.task().forward_loss(batch, model.mesh().param_mesh(), model.layer_runner());
    kept = metered_live_bytes() - before;
    loss.to_local().backward();
  });
  return kept;
}

TEST(ActivationCheckpoint, ForwardKeepsLessForItsBackward) {
  install_memory_meter();
  const int64_t none = kept_by_forward("none");
  const int64_t selective = kept_by_forward("selective");
  const int64_t full = kept_by_forward("full");
  std::printf("kept for backward by one forward: none %lld B, selective %lld B, full %lld B\n",
              static_cast<long long>(none), static_cast<long long>(selective),
              static_cast<long long>(full));
  // Selective drops the [B, H, T, T] probabilities of every block: 4 x 2 x 4 x 64 x 64 doubles.
  EXPECT_LE(selective, none - 4 * 2 * 4 * 64 * 64 * 8);
  // Full keeps each block's input [B, T, C] only: 4 x 2 x 64 x 64 doubles, with the embeddings
  // and the head kept whole.
  EXPECT_LT(full, selective / 2);
}

}  // namespace
}  // namespace vescale
