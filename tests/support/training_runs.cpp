#include "support/training_runs.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "checkpoint/checkpoint.h"
#include "config/job_config.h"
#include "support/run_ranks.h"
#include "train/trainer.h"

namespace vescale::testing {
namespace {

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

/// [data] and [training] of the next-token runs: 5 float64 steps of 8 synthetic sequences of 16
/// tokens.
constexpr const char* kTokenRun = R"(
[data]
source = "synthetic"
[training]
steps = 5
global_batch_size = 8
seq_len = 16
dtype = "float64"
)";

/// The vocabulary and attention the Llama and Mixtral runs share (grouped-query: 2 key/value
/// heads for 4).
constexpr const char* kDecoderShape = R"(vocab_size = 64
vocab_multiple = 16
block_size = 16
n_layer = 4
n_head = 4
n_kv_head = 2
n_embd = 32
)";

}  // namespace

const std::string kGptRun = std::string(R"(
[model]
name = "gpt"
vocab_size = 64
vocab_multiple = 16
block_size = 16
n_layer = 4
n_head = 4
n_embd = 16
)") + kTokenRun + kRun;

const std::string kMlpRun = std::string(R"(
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

const std::string kLlamaRun = std::string("[model]\nname = \"llama\"\n") + kDecoderShape +
                              "intermediate_size = 40\n" + kTokenRun + kRun;

const std::string kMixtralRun = std::string("[model]\nname = \"mixtral\"\n") + kDecoderShape +
                                R"(intermediate_size = 24
num_experts = 4
experts_per_token = 2
router_aux_loss_coef = 0.1
)" + kTokenRun + kRun;

std::string fresh_folder(const std::string& prefix) {
  static int count = 0;
  const std::filesystem::path folder =
      std::filesystem::temp_directory_path() /
      (prefix + "-" + std::to_string(::getpid()) + "-" + std::to_string(count++));
  // A folder of this name is an earlier process's whose pid was this one's (pids are reused;
  // a LoRA test found another run's checkpoints in it): no live process owns it.
  std::filesystem::remove_all(folder);
  return folder.string();
}

RunOutput train_in(const std::string& folder, const std::string& toml,
                   std::vector<std::string> overrides, bool keep) {
  overrides.push_back("job.dump_folder=\"" + folder + "\"");
  const JobConfig config = JobConfig::parse(toml, "training_runs.toml", overrides);
  RunOutput out;
  run_ranks(static_cast<int>(config.world_size()), [&](const comm::Group& world) {
    const TrainSummary summary = run_training(config, world);
    if (world.rank() == 0) {
      out.losses = summary.losses;
      out.aux_losses = summary.aux_losses;
      out.first_val_loss = summary.first_val_loss;
      out.final_val_loss = summary.final_val_loss;
    }
  });
  if (config.checkpoint_format == CheckpointFormat::kMerged && config.checkpoint_interval > 0) {
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

RunOutput resume_across(const std::string& toml, const std::vector<std::string>& from,
                        const std::string& format, const std::vector<std::string>& to,
                        const std::vector<std::string>& common) {
  const std::string first = fresh_folder("vescale-resume");
  std::vector<std::string> save = from;
  save.insert(save.end(), common.begin(), common.end());
  save.insert(save.end(), {"training.steps=3", "checkpoint.interval=3",
                           "checkpoint.format=\"" + format + "\""});
  train_in(first, toml, save, /*keep=*/true);
  std::vector<std::string> resume = to;
  resume.insert(resume.end(), common.begin(), common.end());
  resume.push_back("checkpoint.load=\"" + first + "/checkpoints/latest\"");
  RunOutput out = train(toml, resume);
  std::filesystem::remove_all(first);
  return out;
}

void expect_matches(const RunOutput& run, const RunOutput& ref, const std::string& label,
                    double tol) {
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
  std::string aux;
  if (!ref.aux_losses.empty()) {
    // The logged steps', aligned at the end as the losses.
    ASSERT_FALSE(run.aux_losses.empty()) << label;
    const size_t n = std::min(run.aux_losses.size(), ref.aux_losses.size());
    double aux_err = 0;
    for (size_t i = 1; i <= n; ++i) {
      const double r = ref.aux_losses[ref.aux_losses.size() - i];
      aux_err =
          std::max(aux_err, std::abs(run.aux_losses[run.aux_losses.size() - i] - r) / std::abs(r));
    }
    EXPECT_LE(aux_err, tol) << label;
    aux = fmt::format("  aux loss {:.2g}", aux_err);
  }
  std::printf("%-48s loss %.2g%s  params after the last step %.2g (relative)\n", label.c_str(),
              loss_err, aux.c_str(), param_err);
  EXPECT_LE(loss_err, tol) << label;
  EXPECT_LE(param_err, tol) << label;
}

void expect_curves_close(const RunOutput& run, const RunOutput& ref, const std::string& label,
                         double tol) {
  ASSERT_EQ(run.losses.size(), ref.losses.size()) << label;
  double worst = 0;
  for (size_t s = 0; s < ref.losses.size(); ++s)
    worst = std::max(worst, std::abs(run.losses[s] - ref.losses[s]) / std::abs(ref.losses[s]));
  std::printf("%-48s loss curve %.2g (relative)\n", label.c_str(), worst);
  EXPECT_LE(worst, tol) << label;
}

void expect_switch_matches(const std::string& toml, std::vector<std::string> layout,
                           const std::string& key, const std::string& label, double tol) {
  layout.push_back(key + "=true");
  const RunOutput on = train(toml, layout);
  layout.back() = key + "=false";
  const RunOutput off = train(toml, layout);
  ASSERT_FALSE(off.params.empty()) << label;
  for (const auto& [name, tensor] : off.params)
    EXPECT_EQ(on.params.count(name), 1u) << name;
  expect_matches(on, off, key + " on vs off, " + label, tol);
}

}  // namespace vescale::testing
