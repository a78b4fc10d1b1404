// The config-only memory estimate: its parameter count is the model's, a mixture of experts'
// state splits over ep, and absurd sizes are config errors before anything is built.
#include "config/memory_estimate.h"

#include <c10/util/accumulate.h>
#include <gtest/gtest.h>

#include <chrono>

#include "core/error.h"
#include "train/model_factory.h"

namespace vescale {
namespace {

double built_parameters(const JobConfig& c) {
  double total = 0;
  for (const auto& [fqn, param] : build_model(c)->named_parameters())
    total += static_cast<double>(c10::multiply_integers(param->shape));
  return total;
}

TEST(MemoryEstimate, ParametersAreTheBuiltModels) {
  for (const char* text :
       {"[model]\nn_layer = 3\nn_embd = 48\nvocab_size = 100\n",
        "[model]\nvocab_size = 100\nvocab_multiple = 64\n[parallel]\ntp = 2\ndp = 1\n",
        "[model]\nname = \"mlp\"\nn_layers = 4\nd_in = 10\nd_hidden = 30\nd_out = 7\n"}) {
    const JobConfig c = JobConfig::parse(text, "m.toml");
    EXPECT_EQ(estimate_memory(c).parameters, built_parameters(c)) << text;
  }
}

TEST(MemoryEstimate, StateBytesFollowDtypeAndOptimizer) {
  const JobConfig f32 = JobConfig::parse("", "a.toml");
  const double n = estimate_memory(f32).parameters;
  EXPECT_EQ(estimate_memory(f32).state_bytes, 16 * n);  // value, grad, 2 AdamW states
  EXPECT_EQ(
      estimate_memory(JobConfig::parse("[training]\ndtype = \"float64\"\n", "b.toml")).state_bytes,
      32 * n);
  EXPECT_EQ(
      estimate_memory(JobConfig::parse("[training]\ndtype = \"bfloat16\"\n", "c.toml")).state_bytes,
      16 * n);  // 2 + 2 + 4 (master) + 8
  EXPECT_EQ(
      estimate_memory(JobConfig::parse("[optimizer]\nname = \"sgd\"\n", "d.toml")).state_bytes,
      12 * n);
}

TEST(MemoryEstimate, ALoraJobsBaseIsItsValuesWholeOnEveryDataRank) {
  // NOTE [LoRA]: no gradient or optimizer state for the frozen base, and ZeRO shards none of it.
  const std::string lora = "[lora]\nrank = 4\n[checkpoint]\nload = \"hf:base\"\n";
  const JobConfig full = JobConfig::parse("[parallel]\ndp = 4\nzero = 3\n", "a.toml");
  const JobConfig adapted = JobConfig::parse("[parallel]\ndp = 4\nzero = 3\n" + lora, "b.toml");
  const double n = estimate_memory(full).parameters;
  EXPECT_EQ(estimate_memory(adapted).state_bytes, 4 * n);  // float32 values only
  EXPECT_EQ(estimate_memory(full).dense_state_per_rank_bytes, 16 * n / 4);
  EXPECT_EQ(estimate_memory(adapted).dense_state_per_rank_bytes, 4 * n);
}

TEST(MemoryEstimate, AbsurdSizesAreConfigErrorsAtOnce) {
  const auto start = std::chrono::steady_clock::now();
  try {
    JobConfig::parse("[model]\nn_layer = 1000000000\n", "huge.toml");
    FAIL() << "a billion layers parsed";
  } catch (const UserError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cannot fit"), std::string::npos) << what;
    EXPECT_NE(what.find("model.n_layer = 1000000000"), std::string::npos) << what;
  }
  EXPECT_THROW(JobConfig::parse("[training]\nglobal_batch_size = 1000000000000\nseq_len = 64\n",
                                "batch.toml"),
               UserError);
  EXPECT_THROW(check_fits_memory(JobConfig::parse("", "small.toml"), 1024.0), UserError);
  EXPECT_NO_THROW(check_fits_memory(JobConfig::parse("", "small.toml"), 0.0));  // unknown: no check
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 1.0);
}

TEST(MemoryEstimate, ActivationsFollowTheRecomputeMode) {
  // 4 blocks, C = 64, 4 heads, T = 64, one micro-batch of 8 rows, float32, one rank.
  const std::string model =
      "[model]\nn_layer = 4\nn_embd = 64\nn_head = 4\nblock_size = 64\n"
      "[training]\nseq_len = 64\nglobal_batch_size = 8\nactivation_checkpoint = ";
  auto activations = [&](const std::string& mode, const std::string& more = "") {
    return estimate_memory(JobConfig::parse(model + "\"" + mode + "\"\n" + more, "a.toml"))
        .activation_bytes;
  };
  const double tokens = 8 * 64, C = 64, block = (34 * C + 5 * 4 * 64) * 2;  // float32: x 2
  EXPECT_DOUBLE_EQ(activations("none"), tokens * 4 * block);
  EXPECT_DOUBLE_EQ(activations("selective"), tokens * 4 * 34 * C * 2);
  // Each block's input, and one block's whole activations while it reruns.
  EXPECT_DOUBLE_EQ(activations("full"), tokens * (4 * C * 4 + block));
  EXPECT_DOUBLE_EQ(activations("full", "activation_checkpoint_every = 2\n"),
                   tokens * (2 * block + 2 * C * 4 + block));
  EXPECT_EQ(
      estimate_memory(JobConfig::parse("[model]\nname = \"mlp\"\n", "m.toml")).activation_bytes,
      0.0);
  // The local launcher counts them where they live in this machine's memory.
  const JobConfig c = JobConfig::parse(model + "\"none\"\n", "a.toml");
  const double floor = kWorkerBaseBytes + estimate_memory(c).per_rank_floor_bytes;
  EXPECT_NO_THROW(check_local_workers_fit(c, floor, /*activations_here=*/false));
  try {
    check_local_workers_fit(c, floor, /*activations_here=*/true);
    FAIL() << "activations not counted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("of activations"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("activation_checkpoint = \"full\""), std::string::npos)
        << e.what();
  }
}

// A mixture of experts: 4 layers of 4 experts of C = 32, I = 24.
const std::string kMixtral =
    "[model]\nname = \"mixtral\"\nvocab_size = 64\nvocab_multiple = 16\nblock_size = 16\n"
    "n_layer = 4\nn_head = 4\nn_kv_head = 2\nn_embd = 32\nintermediate_size = 24\n"
    "num_experts = 4\nexperts_per_token = 2\n[training]\nglobal_batch_size = 8\nseq_len = 16\n";

TEST(MemoryEstimate, ExpertStateIsSplitOverEp) {
  auto moe = [](const std::vector<std::string>& overrides) {
    return estimate_memory(JobConfig::parse(kMixtral, "moe.toml", overrides));
  };
  // The expert parameters are those of the built model that carry an expert slot.
  const JobConfig c = JobConfig::parse(kMixtral, "moe.toml");
  double experts = 0;
  for (const auto& [fqn, param] : build_model(c)->named_parameters())
    if (param->expert) experts += static_cast<double>(c10::multiply_integers(param->shape));
  EXPECT_EQ(experts, 4.0 * 4 * 3 * 32 * 24);  // layers x experts x (w1, w3, w2) x C x I
  EXPECT_EQ(estimate_memory(c).expert_parameters, experts);
  EXPECT_EQ(estimate_memory(JobConfig::parse("", "gpt.toml")).expert_parameters, 0.0);

  // Without ZeRO a rank holds the experts' whole state (float32 AdamW: 16 B a parameter) at
  // ep = 1, half of it at ep = 2; the rest as before, and the least a rank can hold unchanged.
  const MemoryEstimate one = moe({"parallel.dp=2"});
  const MemoryEstimate two = moe({"parallel.dp=2", "parallel.ep=2"});
  EXPECT_EQ(one.expert_state_per_rank_bytes, 16 * experts);
  EXPECT_EQ(two.expert_state_per_rank_bytes, one.expert_state_per_rank_bytes / 2);
  EXPECT_EQ(two.dense_state_per_rank_bytes, one.dense_state_per_rank_bytes);
  EXPECT_EQ(one.dense_state_per_rank_bytes, 16 * (one.parameters - experts));
  EXPECT_EQ(two.per_rank_floor_bytes, one.per_rank_floor_bytes);
  // ZeRO-3 over dp = 4 splits each expert 4 ways at ep = 1; at ep = 2 a rank holds half the
  // experts split 2 ways: the same bytes. ZeRO-1 splits only the optimizer state (8 of the 16 B).
  const MemoryEstimate z3 = moe({"parallel.dp=4", "parallel.zero=3"});
  EXPECT_EQ(z3.expert_state_per_rank_bytes, 16 * experts / 4);
  EXPECT_EQ(moe({"parallel.dp=4", "parallel.ep=2", "parallel.zero=3"}).expert_state_per_rank_bytes,
            z3.expert_state_per_rank_bytes);
  EXPECT_EQ(moe({"parallel.dp=4", "parallel.ep=2", "parallel.zero=1"}).expert_state_per_rank_bytes,
            experts / 2 * (8 + 8.0 / 2));
  EXPECT_EQ(moe({"parallel.dp=4", "parallel.ep=4", "parallel.zero=1"}).expert_state_per_rank_bytes,
            experts / 4 * 16);
}

}  // namespace
}  // namespace vescale
