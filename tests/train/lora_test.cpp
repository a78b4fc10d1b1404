// LoRA fine-tuning (NOTE [LoRA]) on threads-as-ranks in float64: adapters trained on a frozen
// base under tp (megatron-sp), pp, dp with ZeRO-3, cp, dp x tp and a mixture's ep (on its
// attention and on its experts) equal the 1-process run within 1e-10 (losses and final
// adapters), with dropout on the adapters' inputs on and off; step 0 is the base; only the
// adapters are saved; resume is exact across layouts.
#include <gtest/gtest.h>

#include <map>

#include "checkpoint/checkpoint.h"
#include "config/job_config.h"
#include "core/error.h"
#include "support/errors.h"
#include "support/training_runs.h"

namespace vescale::lora_test {
namespace {

using testing::expect_matches;
using testing::RunOutput;
using testing::train;
using Overrides = std::vector<std::string>;

Overrides plus(Overrides base, const Overrides& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

struct Base {
  std::string checkpoint;
  RunOutput run;
};

/// A base checkpoint of `toml`: its 5 steps, merged (kept for the whole test program).
const Base& base_run(const std::string& toml) {
  static std::map<const std::string*, Base> bases;
  auto [it, fresh] = bases.emplace(&toml, Base{});
  if (fresh) {
    const std::string folder = testing::fresh_folder("vescale-lora-base");
    it->second.run = testing::train_in(folder, toml, {}, /*keep=*/true);
    it->second.checkpoint = folder + "/checkpoints/latest";
  }
  return it->second;
}

const std::string& base_of(const std::string& toml) {
  return base_run(toml).checkpoint;
}

/// A LoRA run of `toml` on its base: rank 2 adapters on `targets`, optionally dropout 0.1.
Overrides lora(const std::string& toml, const std::string& targets, bool dropout,
               const Overrides& layout = {}) {
  return plus(layout, {"lora.rank=2", "lora.alpha=4.0", "lora.targets=" + targets,
                       std::string("lora.dropout=") + (dropout ? "0.1" : "0.0"),
                       "checkpoint.load=\"" + base_of(toml) + "\""});
}

const std::string kGptTargets = "[\"qkv\", \"o\", \"fc\", \"proj\"]";
const std::string kLlamaTargets = "[\"q\", \"k\", \"v\", \"o\", \"gate\", \"up\", \"down\"]";

const RunOutput& gpt_reference(bool dropout) {
  static std::map<bool, RunOutput> refs;
  if (!refs.count(dropout))
    refs[dropout] = train(testing::kGptRun, lora(testing::kGptRun, kGptTargets, dropout));
  return refs.at(dropout);
}

const RunOutput& llama_reference(bool dropout) {
  static std::map<bool, RunOutput> refs;
  if (!refs.count(dropout))
    refs[dropout] = train(testing::kLlamaRun, lora(testing::kLlamaRun, kLlamaTargets, dropout));
  return refs.at(dropout);
}

TEST(Lora, StepZeroIsTheBaseAndOnlyTheAdaptersTrainAndAreSaved) {
  const RunOutput& base = base_run(testing::kLlamaRun).run;
  const RunOutput& run = llama_reference(false);
  // Before its first step the LoRA model is the base: B = 0.
  std::printf("lora step 0 val_loss %.17g, the base's after its training %.17g\n",
              run.first_val_loss, base.final_val_loss);
  EXPECT_EQ(run.first_val_loss, base.final_val_loss);
  EXPECT_NE(run.losses.back(), run.losses.front());  // the adapters learn
  ASSERT_EQ(run.params.size(), 2u * 7u * 4u);        // A and B of 7 projections in 4 blocks
  for (const auto& [name, value] : run.params) {
    EXPECT_NE(name.find(".lora_"), std::string::npos) << name;
    if (name.find("lora_B") != std::string::npos) {
      EXPECT_GT(value.abs().max().item<double>(), 0) << name;
    }
  }
}

TEST(Lora, DropoutOnTheAdaptersInputChangesTheRun) {
  // Else the dropout rows of the parity tests would test nothing.
  EXPECT_NE(gpt_reference(true).losses.back(), gpt_reference(false).losses.back());
  EXPECT_NE(llama_reference(true).losses.back(), llama_reference(false).losses.back());
}

TEST(Lora, GptLayoutsMatchOneProcess) {
  for (const bool dropout : {false, true}) {
    const std::string on = dropout ? ", dropout 0.1" : "";
    const auto run = [&](const Overrides& layout) {
      return train(testing::kGptRun, lora(testing::kGptRun, kGptTargets, dropout, layout));
    };
    expect_matches(run({"parallel.tp=2", "parallel.plan=\"gpt/megatron-sp\""}),
                   gpt_reference(dropout), "lora gpt tp2 megatron-sp" + on);
    expect_matches(run({"parallel.pp=2"}), gpt_reference(dropout), "lora gpt pp2" + on);
    expect_matches(run({"parallel.dp=2", "parallel.zero=3"}), gpt_reference(dropout),
                   "lora gpt dp2 zero 3" + on);
    expect_matches(run({"parallel.cp=2"}), gpt_reference(dropout), "lora gpt cp2" + on);
    expect_matches(run({"parallel.dp=2", "parallel.tp=2", "parallel.plan=\"gpt/megatron-tp\""}),
                   gpt_reference(dropout), "lora gpt dp2 x tp2" + on);
  }
}

TEST(Lora, LlamaTp2MatchesOneProcess) {
  for (const bool dropout : {false, true}) {
    expect_matches(
        train(testing::kLlamaRun, lora(testing::kLlamaRun, kLlamaTargets, dropout,
                                       {"parallel.tp=2", "parallel.plan=\"llama/megatron-sp\""})),
        llama_reference(dropout),
        std::string("lora llama tp2 megatron-sp") + (dropout ? ", dropout 0.1" : ""));
  }
}

TEST(Lora, MixtralEp2MatchesOneProcess) {
  const std::string targets = "[\"q\", \"v\", \"o\"]";
  for (const bool dropout : {false, true}) {
    const RunOutput ref = train(testing::kMixtralRun, lora(testing::kMixtralRun, targets, dropout));
    expect_matches(train(testing::kMixtralRun, lora(testing::kMixtralRun, targets, dropout,
                                                    {"parallel.dp=2", "parallel.ep=2"})),
                   ref, std::string("lora mixtral dp2 x ep2") + (dropout ? ", dropout 0.1" : ""));
  }
}

TEST(Lora, MixtralExpertsAdaptersMatchOneProcessUnderEp) {
  // Every expert's w1, w2 and w3 adapted beside q and o: each expert's adapters live on its ep
  // rank, take 1 / ep of their gradient like its weights, and ZeRO shards their state.
  const std::string targets = "[\"q\", \"o\", \"experts\"]";
  const RunOutput ref = train(testing::kMixtralRun, lora(testing::kMixtralRun, targets, false));
  ASSERT_EQ(ref.params.size(),
            2u * (2u + 3u * 4u) * 4u);  // A, B of q, o, 4 experts' w1-3; 4 blocks
  for (const char* b : {"w1", "w2", "w3"}) {
    const std::string name =
        std::string("model/model.layers.1.block_sparse_moe.experts.3.") + b + ".lora_B.weight";
    ASSERT_TRUE(ref.params.count(name)) << name;
    EXPECT_GT(ref.params.at(name).abs().max().item<double>(), 0) << name;  // it trains
  }
  const auto run = [&](const Overrides& layout) {
    return train(testing::kMixtralRun, lora(testing::kMixtralRun, targets, false, layout));
  };
  expect_matches(run({"parallel.dp=2", "parallel.ep=2"}), ref, "lora mixtral experts dp2 x ep2");
  expect_matches(run({"parallel.dp=2", "parallel.ep=2", "parallel.zero=3"}), ref,
                 "lora mixtral experts dp2 x ep2 zero 3");
  expect_matches(run({"parallel.pp=2", "parallel.dp=2", "parallel.ep=2"}), ref,
                 "lora mixtral experts pp2 x dp2 x ep2");
  // Resumed on another layout: each expert's adapters and their optimizer state are saved from
  // its ep rank and loaded whole on a stage without ep.
  const Overrides constant{"lr_scheduler.decay=\"constant\""};
  expect_matches(testing::resume_across(testing::kMixtralRun, {"parallel.dp=2", "parallel.ep=2"},
                                        "sharded", {"parallel.pp=2"},
                                        lora(testing::kMixtralRun, targets, false, constant)),
                 train(testing::kMixtralRun, lora(testing::kMixtralRun, targets, false, constant)),
                 "lora mixtral experts dp2 x ep2 sharded -> pp2");
  // Dropout on an expert's adapter input is refused, as peft refuses it.
  const std::string dropout = testing::error_of(
      [&] { train(testing::kMixtralRun, lora(testing::kMixtralRun, "[\"w2\"]", true)); });
  EXPECT_NE(dropout.find("lora.dropout = 0.1 with an expert's projection in lora.targets"),
            std::string::npos)
      << dropout;
}

TEST(Lora, SomeBlocksAndAFirstPipelineStageWithNone) {
  // lora.layers = [2, 3]: under pp2 the first stage (the embedding, blocks 0 and 1) has no
  // adapter, so nothing there needs a gradient.
  const std::string targets = "[\"q\", \"down\"]";
  const Overrides layers{"lora.layers=[2, 3]"};
  const RunOutput ref = train(testing::kLlamaRun, lora(testing::kLlamaRun, targets, false, layers));
  EXPECT_EQ(ref.params.size(), 2u * 2u * 2u);  // A and B of 2 projections in 2 blocks
  expect_matches(train(testing::kLlamaRun,
                       lora(testing::kLlamaRun, targets, false, plus(layers, {"parallel.pp=2"}))),
                 ref, "lora llama blocks 2-3, pp2 (1f1b)");
  expect_matches(
      train(testing::kLlamaRun, lora(testing::kLlamaRun, targets, false,
                                     plus(layers, {"parallel.pp=2", "parallel.pp_schedule=\"zbv\"",
                                                   "parallel.pp_virtual=2"}))),
      ref, "lora llama blocks 2-3, pp2 zbv");
}

TEST(Lora, ResumesExactlyOnAnotherLayout) {
  // A constant learning rate: the first run's 3 steps are the schedule's first 3 of 5.
  const Overrides constant{"lr_scheduler.decay=\"constant\""};
  const RunOutput ref =
      train(testing::kLlamaRun, lora(testing::kLlamaRun, kLlamaTargets, true, constant));
  const Overrides tp2{"parallel.tp=2", "parallel.plan=\"llama/megatron-sp\""};
  const Overrides pp2_dp2{"parallel.pp=2", "parallel.dp=2", "parallel.zero=3"};
  expect_matches(testing::resume_across(testing::kLlamaRun, tp2, "sharded", pp2_dp2,
                                        lora(testing::kLlamaRun, kLlamaTargets, true, constant)),
                 ref, "lora llama tp2 sharded -> pp2 x dp2 zero 3");
}

TEST(Lora, BadSettingsAreRefusedInOneLine) {
  const std::string base = "checkpoint.load=\"" + base_of(testing::kLlamaRun) + "\"";
  const auto refused = [&](const Overrides& overrides) {
    return testing::error_of([&] {
      vescale::JobConfig::parse(testing::kLlamaRun, "lora.toml", plus(overrides, {base}));
    });
  };
  EXPECT_NE(refused({"lora.rank=2", "lora.targets=[\"q\", \"fc\"]"})
                .find("lora.targets names \"fc\", not a projection of llama"),
            std::string::npos);
  EXPECT_NE(refused({"lora.rank=2", "lora.targets=[]"}).find("lora.targets is empty"),
            std::string::npos);
  EXPECT_NE(refused({"lora.rank=2", "lora.layers=[4]"})
                .find("lora.layers names block 4, and the model's blocks are 0 to 3"),
            std::string::npos);
  EXPECT_NE(refused({"lora.rank=-1"}).find("lora.rank"), std::string::npos);
  const std::string no_base = testing::error_of(
      [&] { vescale::JobConfig::parse(testing::kLlamaRun, "lora.toml", {"lora.rank=2"}); });
  EXPECT_NE(no_base.find("set checkpoint.load to the base"), std::string::npos) << no_base;
  const std::string mlp = testing::error_of([&] {
    vescale::JobConfig::parse(testing::kMlpRun, "lora.toml", {"lora.rank=2", base});
  });
  EXPECT_NE(mlp.find("model.name = \"mlp\" has none LoRA can adapt"), std::string::npos) << mlp;
  // Rank 17 > 16, the smaller side of GPT's [16, 16] projections.
  const std::string rank = testing::error_of([&] {
    train(testing::kGptRun, plus(lora(testing::kGptRun, kGptTargets, false), {"lora.rank=17"}));
  });
  EXPECT_NE(rank.find("lora.rank = 17 is more than transformer.h.0.attn.q_proj's smaller side, 16"),
            std::string::npos)
      << rank;
}

}  // namespace
}  // namespace vescale::lora_test
