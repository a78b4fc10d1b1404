// Pipeline parallelism end to end on threads-as-ranks: whole training runs (run_training) under
// every schedule and with TP and DP inside the stages, against the 1-process run, float64: the
// loss of every step and every parameter after 5 AdamW steps (read back from the merged
// checkpoint each run writes at its end).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>

#include "checkpoint/checkpoint.h"
#include "config/job_config.h"
#include "support/run_ranks.h"
#include "train/trainer.h"

namespace vescale {
namespace {

constexpr double kTol = 1e-10;

/// 5 float64 AdamW steps of 4 micro-batches, a merged checkpoint at the end.
constexpr const char* kRun = R"(
[parallel]
microbatches = 4
[optimizer]
lr = 0.01
[lr_scheduler]
warmup_steps = 0
[eval]
interval = 0
windows = 2
[checkpoint]
interval = 5
format = "merged"
[metrics]
log_interval = 5
peak_flops = 1e12
)";

const std::string kGpt = std::string(R"(
[model]
name = "gpt"
vocab_size = 64
vocab_multiple = 16
block_size = 16
n_layer = 4
n_head = 4
n_embd = 16
[data]
source = "synthetic"
[training]
steps = 5
global_batch_size = 8
seq_len = 16
dtype = "float64"
)") + kRun;

const std::string kMlp = std::string(R"(
[model]
name = "mlp"
d_in = 8
d_hidden = 16
d_out = 4
n_layers = 4
[data]
source = "synthetic"
[training]
steps = 5
global_batch_size = 16
dtype = "float64"
)") + kRun;

struct RunOutput {
  std::vector<double> losses;
  std::map<std::string, at::Tensor> params;
};

std::string fresh_folder() {
  static int count = 0;
  return (std::filesystem::temp_directory_path() /
          ("vescale-pipeline-" + std::to_string(::getpid()) + "-" + std::to_string(count++)))
      .string();
}

/// Trains in `folder` (kept when `keep`) and reads back the merged checkpoint of the last step
/// when the run wrote one.
RunOutput train_in(const std::string& folder, const std::string& toml,
                   std::vector<std::string> overrides, bool keep = false) {
  overrides.push_back("job.dump_folder=\"" + folder + "\"");
  const JobConfig config = JobConfig::parse(toml, "pipeline_test.toml", overrides);
  RunOutput out;
  testing::run_ranks(static_cast<int>(config.world_size()), [&](const comm::Group& world) {
    const TrainSummary summary = run_training(config, world);
    if (world.rank() == 0) out.losses = summary.losses;
  });
  if (config.checkpoint_format == "merged" && config.checkpoint_interval > 0) {
    const CheckpointReader reader(folder + "/checkpoints/latest");
    for (const auto& name : reader.names()) {
      if (name.rfind("model/", 0) == 0) out.params[name] = reader.read_full(name);
    }
  }
  if (!keep) std::filesystem::remove_all(folder);
  return out;
}

RunOutput train(const std::string& toml, std::vector<std::string> overrides) {
  return train_in(fresh_folder(), toml, std::move(overrides));
}

/// Prints and checks the worst relative loss error and the parameters' max-norm difference.
void expect_matches(const RunOutput& run, const RunOutput& ref, const std::string& label) {
  // A resumed run has the last steps' losses only.
  ASSERT_LE(run.losses.size(), ref.losses.size()) << label;
  const size_t skip = ref.losses.size() - run.losses.size();
  double loss_err = 0;
  for (size_t s = 0; s < run.losses.size(); ++s) {
    const double r = ref.losses[skip + s];
    loss_err = std::max(loss_err, std::abs(run.losses[s] - r) / std::abs(r));
  }
  ASSERT_EQ(run.params.size(), ref.params.size()) << label;
  double scale = 0, diff = 0;
  for (const auto& [name, p] : ref.params) {
    scale = std::max(scale, p.abs().max().item<double>());
    diff = std::max(diff, (run.params.at(name) - p).abs().max().item<double>());
  }
  const double param_err = diff / scale;
  std::printf("%-44s loss %.2g  params after 5 AdamW steps %.2g (relative)\n", label.c_str(),
              loss_err, param_err);
  EXPECT_LE(loss_err, kTol) << label;
  EXPECT_LE(param_err, kTol) << label;
}

const RunOutput& gpt_reference() {
  static const RunOutput ref = train(kGpt, {});
  return ref;
}

TEST(Pipeline, GptEverySchedule) {
  expect_matches(train(kGpt, {"parallel.pp=2", "parallel.pp_schedule=\"1f1b\""}), gpt_reference(),
                 "GPT PP2 1f1b");
  expect_matches(train(kGpt, {"parallel.pp=2", "parallel.pp_schedule=\"gpipe\""}), gpt_reference(),
                 "GPT PP2 gpipe");
  expect_matches(train(kGpt, {"parallel.pp=2", "parallel.pp_schedule=\"interleaved-1f1b\"",
                              "parallel.pp_virtual=2"}),
                 gpt_reference(), "GPT PP2 x virtual 2 interleaved-1f1b");
  expect_matches(
      train(kGpt, {"parallel.pp=2", "parallel.pp_schedule=\"zbv\"", "parallel.pp_virtual=2"}),
      gpt_reference(), "GPT PP2 zbv");
  expect_matches(train(kGpt, {"parallel.pp=2", "parallel.pp_split=[\"transformer.h.2\"]"}),
                 gpt_reference(), "GPT PP2 1f1b split at transformer.h.2");
  expect_matches(train(kGpt, {"parallel.pp=2", "parallel.pp_schedule=\"zb-h1\""}), gpt_reference(),
                 "GPT PP2 zb-h1");
}

TEST(Pipeline, GptPp4AndUnevenAndEightMicroBatches) {
  expect_matches(train(kGpt, {"parallel.pp=4"}), gpt_reference(), "GPT PP4 1f1b");
  expect_matches(train(kGpt, {"parallel.pp=2", "parallel.microbatches=8"}), gpt_reference(),
                 "GPT PP2 1f1b, 8 micro-batches");
  const RunOutput three_blocks = train(kGpt, {"model.n_layer=3"});
  expect_matches(train(kGpt, {"model.n_layer=3", "parallel.pp=2"}), three_blocks,
                 "GPT PP2, 3 blocks");
}

TEST(Pipeline, GptWithTensorAndDataParallelInsideStages) {
  expect_matches(
      train(kGpt, {"parallel.pp=2", "parallel.tp=2", "parallel.plan=\"gpt/megatron-sp\""}),
      gpt_reference(), "GPT PP2 x TP2 megatron-sp");
  expect_matches(train(kGpt, {"parallel.pp=2", "parallel.dp=2"}), gpt_reference(), "GPT PP2 x DP2");
  expect_matches(train(kGpt, {"parallel.pp=2", "parallel.dp=2", "parallel.tp=2",
                              "parallel.plan=\"gpt/megatron-sp\""}),
                 gpt_reference(), "GPT PP2 x DP2 x TP2 megatron-sp");
}

TEST(Pipeline, Mlp) {
  const RunOutput ref = train(kMlp, {});
  expect_matches(train(kMlp, {"parallel.pp=2"}), ref, "MLP PP2 1f1b");
  expect_matches(
      train(kMlp, {"parallel.pp=2", "parallel.pp_schedule=\"zbv\"", "parallel.pp_virtual=2"}), ref,
      "MLP PP2 zbv");
}

TEST(Pipeline, CheckpointsMoveBetweenPipelineDegrees) {
  // 3 steps in one layout and format, then steps 4-5 resumed in another: the curve and the
  // parameters of 5 uninterrupted steps on 1 process (constant LR: the schedule's length differs).
  const std::string constant = "lr_scheduler.decay=\"constant\"";
  const RunOutput ref = train(kGpt, {constant});
  const std::vector<std::string> three_d{"parallel.pp=2", "parallel.dp=2", "parallel.tp=2",
                                         "parallel.plan=\"gpt/megatron-sp\""};
  struct Case {
    std::vector<std::string> from;
    std::string format;
    std::vector<std::string> to;
    std::string label;
  };
  const std::vector<Case> cases{
      {three_d, "sharded", {}, "PP2xDP2xTP2 sharded -> 1 process"},
      {three_d,
       "deduped",
       {"parallel.tp=4", "parallel.plan=\"gpt/megatron-tp\""},
       "PP2xDP2xTP2 deduped -> TP4"},
      {three_d, "merged", {"parallel.pp=4"}, "PP2xDP2xTP2 merged -> PP4"},
      {{}, "sharded", {"parallel.pp=2"}, "1 process sharded -> PP2"},
      {{"parallel.pp=2", "parallel.pp_schedule=\"zbv\"", "parallel.pp_virtual=2"},
       "deduped",
       {"parallel.pp=2", "parallel.dp=2"},
       "PP2 zbv deduped -> PP2xDP2"},
  };
  for (const Case& c : cases) {
    const std::string first = fresh_folder();
    std::vector<std::string> save = c.from;
    save.insert(save.end(), {constant, "training.steps=3", "checkpoint.interval=3",
                             "checkpoint.format=\"" + c.format + "\""});
    train_in(first, kGpt, save, /*keep=*/true);
    std::vector<std::string> resume = c.to;
    resume.insert(resume.end(), {constant, "checkpoint.load=\"" + first + "/checkpoints/latest\""});
    expect_matches(train(kGpt, resume), ref, c.label);
    std::filesystem::remove_all(first);
  }
}

TEST(Pipeline, Float32CurvesStayWithin1e4) {
  // The user's default precision: 20 steps of PP2 x DP2 x TP2 (1f1b) and PP2 zbv against 1 process.
  const std::vector<std::string> f32{"training.dtype=\"float32\"", "training.steps=20",
                                     "checkpoint.interval=0"};
  const RunOutput ref = train(kGpt, f32);
  for (const auto& [layout, label] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"parallel.pp=2", "parallel.dp=2", "parallel.tp=2",
             "parallel.plan=\"gpt/megatron-sp\""},
            "float32 PP2 x DP2 x TP2, 20 steps"},
           {{"parallel.pp=2", "parallel.pp_schedule=\"zbv\"", "parallel.pp_virtual=2"},
            "float32 PP2 zbv, 20 steps"}}) {
    std::vector<std::string> overrides = f32;
    overrides.insert(overrides.end(), layout.begin(), layout.end());
    const RunOutput run = train(kGpt, overrides);
    ASSERT_EQ(run.losses.size(), ref.losses.size());
    double worst = 0;
    for (size_t s = 0; s < ref.losses.size(); ++s)
      worst = std::max(worst, std::abs(run.losses[s] - ref.losses[s]) / std::abs(ref.losses[s]));
    std::printf("%-44s loss curve %.2g (relative)\n", label.c_str(), worst);
    EXPECT_LE(worst, 1e-4) << label;
  }
}

}  // namespace
}  // namespace vescale
