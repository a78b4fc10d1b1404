// The config-only memory estimate: its parameter count is the model's, and absurd sizes are
// config errors before anything is built.
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

}  // namespace
}  // namespace vescale
