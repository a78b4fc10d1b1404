// NOTE [Loss masks]: fine-tuning data's loss averages over the trained targets of the whole
// global batch, so every layout and micro-batch count is the 1-process run (float64: losses,
// validation and every parameter after 5 steps), packed or one example a row; and a mask that
// trains every token is the unmasked loss.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/prepare_tokens.h"
#include "support/temp_folder.h"
#include "support/training_runs.h"

namespace vescale {
namespace {

using testing::expect_matches;
using testing::RunOutput;
using testing::train;

/// A folder of fine-tuning tokens (bytes), made once: 300 examples of varying lengths, some
/// longer than a window, some with several turns.
const std::string& sft_folder() {
  static const std::string folder = [] {
    const std::string dir = testing::temp_folder("loss-mask-data");
    std::ofstream(dir + "/t.toml") << "[system]\nbefore = \"<s>\"\nafter = \"\\n\"\n"
                                      "[user]\nbefore = \"<u>\"\nafter = \"\\n\"\n"
                                      "[assistant]\nbefore = \"<a>\"\nafter = \"</a>\\n\"\n";
    std::ofstream lines(dir + "/e.jsonl");
    for (int i = 0; i < 300; ++i) {
      const std::string q(static_cast<size_t>(1 + (i * 7) % 23), static_cast<char>('a' + i % 26));
      const std::string a(static_cast<size_t>(1 + (i * 11) % 41), static_cast<char>('A' + i % 26));
      if (i % 3 == 0) {
        lines << "{\"prompt\": \"" << q << "\", \"response\": \"" << a << "\"}\n";
      } else {
        lines << "{\"messages\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": "
                 "\"user\", \"content\": \""
              << q << "\"}, {\"role\": \"assistant\", \"content\": \"" << a
              << "\"}, {\"role\": \"user\", \"content\": \"more\"}, {\"role\": \"assistant\", "
                 "\"content\": \""
              << a.substr(0, static_cast<size_t>(i % 5)) << "ok\"}]}\n";
      }
    }
    lines.close();
    PrepareOptions o;
    o.files = {dir + "/e.jsonl"};
    o.output = dir + "/tokens";
    o.sft = true;
    o.chat_template = dir + "/t.toml";
    o.val_fraction = 0.1;
    prepare_tokens(o, [](const std::string&) {});
    return dir + "/tokens";
  }();
  return folder;
}

const std::string kSftRun = R"(
[model]
name = "gpt"
vocab_size = 256
vocab_multiple = 16
block_size = 32
n_layer = 2
n_head = 2
n_embd = 16
[data]
source = "tokens"
[training]
steps = 5
global_batch_size = 8
seq_len = 32
dtype = "float64"
[optimizer]
lr = 0.01
[lr_scheduler]
warmup_steps = 0
[eval]
interval = 0
windows = 6
[checkpoint]
interval = 5
format = "merged"
[metrics]
peak_flops = 1e12
)";

RunOutput sft_run(std::vector<std::string> overrides, const std::string& folder = sft_folder()) {
  overrides.push_back("data.path=\"" + folder + "\"");
  return train(kSftRun, overrides);
}

/// expect_matches, and the validation losses within `tol` too.
void expect_same_run(const RunOutput& run, const RunOutput& ref, const std::string& label,
                     double tol = 1e-10) {
  expect_matches(run, ref, label, tol);
  const double val = std::max(std::abs(run.first_val_loss - ref.first_val_loss),
                              std::abs(run.final_val_loss - ref.final_val_loss)) /
                     std::abs(ref.final_val_loss);
  std::printf("%-48s val_loss %.2g (relative)\n", label.c_str(), val);
  EXPECT_LE(val, tol) << label;
}

TEST(LossMask, LayoutsAndMicroBatchesMatchOneProcess) {
  const std::string sp = "parallel.plan=\"gpt/megatron-sp\"";
  const RunOutput ref = sft_run({"parallel.microbatches=1"});
  const std::vector<std::pair<std::string, std::vector<std::string>>> layouts{
      {"1 process, 4 micro-batches", {"parallel.microbatches=4"}},
      {"dp2", {"parallel.dp=2", "parallel.microbatches=1"}},
      {"tp2 megatron-sp (vocab-parallel)", {"parallel.tp=2", sp, "parallel.microbatches=1"}},
      {"tp2, the unfused loss", {"parallel.tp=2", sp, "training.fused_loss=false"}},
      {"pp2, 2 micro-batches", {"parallel.pp=2", "parallel.microbatches=2"}},
      {"cp2", {"parallel.cp=2", "parallel.microbatches=1"}},
  };
  for (const auto& [label, layout] : layouts)
    expect_same_run(sft_run(layout), ref, "masked " + label);
}

TEST(LossMask, OneExampleARowMatchesOneProcess) {
  const std::string padded = "data.sft_pack=false";
  const RunOutput ref = sft_run({padded, "parallel.microbatches=1"});
  EXPECT_NE(ref.losses.back(), sft_run({"parallel.microbatches=1"}).losses.back());
  expect_same_run(sft_run({padded, "parallel.dp=2", "parallel.microbatches=2"}), ref,
                  "masked, padded examples, dp2 x 2 micro-batches");
  expect_same_run(
      sft_run({padded, "parallel.cp=2", "parallel.tp=2", "parallel.plan=\"gpt/megatron-sp\""}), ref,
      "masked, padded examples, cp2 x tp2");
}

TEST(LossMask, AMaskThatTrainsEveryTokenIsTheUnmaskedLoss) {
  namespace fs = std::filesystem;
  const std::string all = testing::temp_folder("loss-mask-all");
  const std::string none = testing::temp_folder("loss-mask-none");
  for (const char* name : {"train.bin", "val.bin", "train.docs.bin", "val.docs.bin", "meta.json"}) {
    fs::copy_file(sft_folder() + "/" + name, all + "/" + name);
    if (std::string(name).find("docs") == std::string::npos && std::string(name) != "meta.json")
      fs::copy_file(sft_folder() + "/" + name, none + "/" + name);
  }
  for (const char* split : {"train", "val"}) {
    const auto bytes = fs::file_size(sft_folder() + "/" + split + ".mask.bin");
    std::ofstream(all + "/" + split + ".mask.bin", std::ios::binary) << std::string(bytes, '\1');
  }
  const std::vector<std::string> layout{"parallel.dp=2", "parallel.microbatches=2"};
  expect_same_run(sft_run(layout, all), sft_run(layout, none),
                  "a mask of ones vs no mask, dp2 x 2 micro-batches", 1e-12);
}

}  // namespace
}  // namespace vescale
