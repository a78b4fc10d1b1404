// ZeRO over dp end to end on threads-as-ranks (docs/design.md §15): stages 1, 2 and 3 against the
// same layout without ZeRO and against the 1-process run (float64: every step's loss and the
// parameters after 5 AdamW steps within 1e-10), with TP, PP, micro-batches and uneven pieces;
// float32 curves; checkpoints between stages and layouts; memory and dp bytes measured on rank 0.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "comm/comm_stats.h"
#include "support/run_ranks.h"
#include "support/training_runs.h"
#include "train/job.h"

namespace vescale {
namespace {

using testing::expect_matches;
using testing::fresh_folder;
using testing::kGptRun;
using testing::RunOutput;
using testing::train;
using testing::train_in;
const std::string& kMlp = testing::kMlpRun;

std::vector<std::string> with(std::vector<std::string> layout, const std::string& more) {
  layout.push_back(more);
  return layout;
}

std::string zero(int stage) {
  return "parallel.zero=" + std::to_string(stage);
}

/// Stages 1-3 of `layout` against the same layout at stage 0 and against `reference`.
void expect_every_stage(const std::string& toml, const std::vector<std::string>& layout,
                        const RunOutput& reference, const std::string& label) {
  const RunOutput plain = train(toml, layout);
  expect_matches(plain, reference, label + " zero 0 vs 1 process");
  for (int stage = 1; stage <= 3; ++stage) {
    const RunOutput run = train(toml, with(layout, zero(stage)));
    const std::string name = label + " zero " + std::to_string(stage);
    expect_matches(run, plain, name + " vs zero 0");
    expect_matches(run, reference, name + " vs 1 process");
  }
}

const RunOutput& gpt_reference() {
  static const RunOutput ref = train(kGptRun, {});
  return ref;
}

TEST(Zero, GptDp2AndDp4) {
  expect_every_stage(kGptRun, {"parallel.dp=2"}, gpt_reference(), "GPT DP2 (4 micro-batches)");
  expect_every_stage(kGptRun, {"parallel.dp=4", "parallel.microbatches=2"}, gpt_reference(),
                     "GPT DP4 (2 micro-batches)");
}

TEST(Zero, GptDp2Tp2MegatronSp) {
  expect_every_stage(kGptRun,
                     {"parallel.dp=2", "parallel.tp=2", "parallel.plan=\"gpt/megatron-sp\"",
                      "parallel.microbatches=2"},
                     gpt_reference(), "GPT DP2 x TP2 megatron-sp");
}

TEST(Zero, GptPp2Dp2) {
  expect_every_stage(kGptRun, {"parallel.pp=2", "parallel.dp=2", "parallel.microbatches=2"},
                     gpt_reference(), "GPT PP2 x DP2 1f1b");
  expect_matches(train(kGptRun, {"parallel.pp=2", "parallel.dp=2", "parallel.pp_schedule=\"zbv\"",
                                 "parallel.pp_virtual=2", "parallel.microbatches=2", zero(3)}),
                 gpt_reference(), "GPT PP2 zbv x DP2 zero 3 vs 1 process");
}

TEST(Zero, MlpUnevenPieces) {
  // d_hidden 10 and d_out 3 over dp 4: rows 3, 3, 3, 1 and 1, 1, 1, 0 (an empty piece).
  const std::vector<std::string> uneven{"model.d_hidden=10", "model.d_out=3"};
  const RunOutput ref = train(kMlp, uneven);
  expect_every_stage(kMlp, with(with(uneven, "parallel.dp=4"), "parallel.microbatches=2"), ref,
                     "MLP DP4 uneven rows");
  expect_every_stage(kMlp, with(uneven, "parallel.dp=2"), ref, "MLP DP2 uneven rows");
}

TEST(Zero, ClippingCountsEachElementOnce) {
  // A clip far below the gradient norm scales every step: a norm that counted a piece twice (or
  // missed one) would scale differently from the 1-process run.
  const std::string clip = "training.grad_clip=0.05";
  const RunOutput ref = train(kGptRun, {clip});
  for (int stage = 1; stage <= 3; ++stage) {
    expect_matches(
        train(kGptRun, {clip, "parallel.dp=2", "parallel.tp=2", "parallel.plan=\"gpt/megatron-sp\"",
                        "parallel.microbatches=2", zero(stage)}),
        ref, "clipped DP2 x TP2 zero " + std::to_string(stage));
    expect_matches(train(kGptRun, {clip, "parallel.pp=2", "parallel.dp=2",
                                   "parallel.microbatches=2", zero(stage)}),
                   ref, "clipped PP2 x DP2 zero " + std::to_string(stage));
  }
}

TEST(Zero, Float32CurvesStayWithin1e4) {
  const std::vector<std::string> f32{"training.dtype=\"float32\"", "training.steps=20",
                                     "checkpoint.interval=0", "parallel.microbatches=2"};
  const RunOutput ref = train(kGptRun, f32);
  const std::vector<std::pair<std::vector<std::string>, std::string>> layouts{
      {{"parallel.dp=2", "parallel.tp=2", "parallel.plan=\"gpt/megatron-sp\"", zero(3)},
       "float32 DP2 x TP2 zero 3, 20 steps"},
      {{"parallel.dp=4", zero(2)}, "float32 DP4 zero 2, 20 steps"},
      {{"parallel.pp=2", "parallel.dp=2", zero(1)}, "float32 PP2 x DP2 zero 1, 20 steps"},
  };
  for (const auto& [layout, label] : layouts) {
    std::vector<std::string> overrides = f32;
    overrides.insert(overrides.end(), layout.begin(), layout.end());
    testing::expect_curves_close(train(kGptRun, overrides), ref, label, 1e-4);
  }
}

TEST(Zero, CheckpointsMoveBetweenStagesAndLayouts) {
  // 3 steps in one layout, stage and format, steps 4-5 resumed in another: the curve and the
  // parameters of 5 uninterrupted steps on 1 process (constant LR).
  const std::string constant = "lr_scheduler.decay=\"constant\"";
  const RunOutput ref = train(kGptRun, {constant});
  const std::vector<std::string> dp2_tp2{"parallel.dp=2", "parallel.tp=2",
                                         "parallel.plan=\"gpt/megatron-sp\"",
                                         "parallel.microbatches=2"};
  const std::vector<std::string> dp4{"parallel.dp=4", "parallel.microbatches=2", zero(3)};
  const std::vector<std::string> pp2_dp2{"parallel.pp=2", "parallel.dp=2",
                                         "parallel.microbatches=2", zero(1)};
  struct Case {
    std::vector<std::string> from;
    std::string format;
    std::vector<std::string> to;
    std::string label;
  };
  const std::vector<Case> cases{
      {with(dp2_tp2, zero(2)), "sharded", {}, "DP2xTP2 zero 2 sharded -> 1 process zero 0"},
      {with(dp2_tp2, zero(2)), "deduped", dp4, "DP2xTP2 zero 2 deduped -> DP4 zero 3"},
      {with(dp2_tp2, zero(2)), "merged", pp2_dp2, "DP2xTP2 zero 2 merged -> PP2xDP2 zero 1"},
      {dp4, "sharded", with(dp2_tp2, zero(2)), "DP4 zero 3 sharded -> DP2xTP2 zero 2"},
      {pp2_dp2, "deduped", with(dp2_tp2, zero(2)), "PP2xDP2 zero 1 deduped -> DP2xTP2 zero 2"},
      {{}, "merged", dp4, "1 process merged -> DP4 zero 3"},
  };
  for (const Case& c : cases)
    expect_matches(testing::resume_across(kGptRun, c.from, c.format, c.to, {constant}), ref,
                   c.label);
}

TEST(Zero, ResumeInTheSameLayoutIsBitwise) {
  for (const std::string format : {"sharded", "deduped"}) {
    const std::vector<std::string> layout{
        "parallel.dp=2",           "parallel.tp=2", "parallel.plan=\"gpt/megatron-sp\"",
        "parallel.microbatches=2", zero(3),         "checkpoint.format=\"" + format + "\""};
    const RunOutput whole = train(kGptRun, layout);
    const std::string first = fresh_folder("vescale-zero");
    train_in(first, kGptRun, with(with(layout, "training.steps=5"), "checkpoint.interval=3"), true);
    // Steps 4 and 5 from the step-3 checkpoint (the run also wrote step 3 of 5).
    const RunOutput resumed =
        train(kGptRun, with(layout, "checkpoint.load=\"" + first + "/checkpoints/step-000003\""));
    std::filesystem::remove_all(first);
    ASSERT_EQ(resumed.losses.size(), 2u);
    EXPECT_EQ(resumed.losses[0], whole.losses[3]) << format;
    EXPECT_EQ(resumed.losses[1], whole.losses[4]) << format;
  }
}

// ---------------------------------------------------------------------------------------------
// Memory and bytes, measured on rank 0 over one step (the second: buckets made, state allocated).

struct StepFigures {
  std::map<std::string, int64_t> state;  ///< params, grads, optimizer
  std::map<comm::CommKind, int64_t> dp_bytes;
  int64_t peak_gathered = 0, largest_layer = 0, shared = 0;
};

StepFigures measure_step(std::vector<std::string> overrides) {
  // A GPT of 8 blocks, so that one layer is a small part of the whole.
  overrides.insert(overrides.end(), {"model.n_layer=8", "model.n_embd=32",
                                     "job.dump_folder=\"" + fresh_folder("vescale-zero") + "\""});
  const JobConfig config = JobConfig::parse(kGptRun, "zero_test.toml", overrides);
  StepFigures out;
  testing::run_ranks(static_cast<int>(config.world_size()), [&](const comm::Group& world) {
    auto job = build_job(config, world);
    auto step = [&](int64_t s) {
      job->train_step->run([&](int64_t micro) { return job->model->micro_batch(s, micro); }, 1e-3);
    };
    step(0);
    if (job->zero) job->zero->take_peak_gathered_bytes();
    const auto before = world.stats().snapshot();
    step(1);
    const auto after = world.stats().snapshot();
    if (world.rank() != 0) return;
    for (const auto& [kind, bytes] : job->state_bytes())
      out.state[kind] = bytes;
    for (const auto& [key, count] : after) {
      if (key.first != "dp") continue;
      const int64_t was = before.count(key) ? before.at(key).bytes : 0;
      out.dp_bytes[key.second] += count.bytes - was;
    }
    if (job->zero) {
      out.peak_gathered = job->zero->take_peak_gathered_bytes();
      out.largest_layer = job->zero->largest_layer_bytes();
      out.shared = job->zero->shared_bytes();
    }
  });
  return out;
}

int64_t dp_total(const StepFigures& f) {
  int64_t total = 0;
  for (const auto& [kind, bytes] : f.dp_bytes)
    total += bytes;
  return total;
}

void expect_fraction(int64_t part, int64_t whole, double fraction, const std::string& label) {
  const double ratio = static_cast<double>(part) / static_cast<double>(whole);
  std::printf("%-48s %lld / %lld bytes = %.4f (expected %.4f)\n", label.c_str(),
              static_cast<long long>(part), static_cast<long long>(whole), ratio, fraction);
  EXPECT_NEAR(ratio, fraction, 0.01 * fraction) << label;
}

TEST(Zero, MemoryOnRank0IsOneOverDp) {
  for (const int dp : {2, 4}) {
    const std::vector<std::string> layout{"parallel.dp=" + std::to_string(dp),
                                          "parallel.microbatches=1"};
    StepFigures base = measure_step(layout);
    const double part = 1.0 / dp;
    const std::string at = " dp " + std::to_string(dp);
    for (int stage = 1; stage <= 3; ++stage) {
      StepFigures f = measure_step(with(layout, zero(stage)));
      const std::string name = "zero " + std::to_string(stage) + at;
      expect_fraction(f.state["optimizer"], base.state["optimizer"], part,
                      name + ": optimizer state");
      expect_fraction(f.state["grads"], base.state["grads"], stage >= 2 ? part : 1.0,
                      name + ": gradients");
      expect_fraction(f.state["params"], base.state["params"], stage == 3 ? part : 1.0,
                      name + ": parameters");
      if (stage == 3) {
        // The layer computing, the next one's all-gather in flight, and the tied wte (whole from
        // the embedding to the head).
        std::printf("%-48s peak gathered %lld bytes; largest layer %lld, tied %lld bytes\n",
                    name.c_str(), static_cast<long long>(f.peak_gathered),
                    static_cast<long long>(f.largest_layer), static_cast<long long>(f.shared));
        EXPECT_GT(f.peak_gathered, f.largest_layer + f.shared) << name << ": nothing prefetched";
        EXPECT_LE(f.peak_gathered, 2 * f.largest_layer + f.shared) << name;
      }
    }
  }
}

TEST(Zero, DpBytesPerStepMatchTheAllReduce) {
  const std::vector<std::string> layout{"parallel.dp=4", "parallel.microbatches=1"};
  StepFigures base = measure_step(layout);
  const int64_t all_reduce = dp_total(base);
  EXPECT_EQ(base.dp_bytes.count(comm::CommKind::kReduceScatter), 0u);
  for (int stage = 1; stage <= 3; ++stage) {
    StepFigures f = measure_step(with(layout, zero(stage)));
    const std::string name = "zero " + std::to_string(stage) + " dp 4: dp bytes per step";
    EXPECT_GT(f.dp_bytes[comm::CommKind::kReduceScatter], 0) << name;
    EXPECT_GT(f.dp_bytes[comm::CommKind::kAllGather], 0) << name;
    expect_fraction(dp_total(f), all_reduce, stage == 3 ? 1.5 : 1.0, name);
  }
}

}  // namespace
}  // namespace vescale
