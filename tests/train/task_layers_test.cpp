// The layer list from a config alone (what plan schedule cuts) is the task's own.
#include <gtest/gtest.h>

#include "config/job_config.h"
#include "train/model_factory.h"
#include "train/task.h"

namespace vescale {
namespace {

void expect_same_layers(const JobConfig& config) {
  auto model = build_model(config);
  const std::vector<Layer> from_config = model_layers(config, *model);
  const std::vector<Layer> from_task = make_task(config)->layers();
  ASSERT_EQ(from_config.size(), from_task.size());
  for (size_t i = 0; i < from_task.size(); ++i) {
    EXPECT_EQ(from_config[i].name, from_task[i].name);
    EXPECT_EQ(from_config[i].modules, from_task[i].modules);
    EXPECT_DOUBLE_EQ(from_config[i].flops_per_sample, from_task[i].flops_per_sample);
  }
  const auto stage_input = stage_layers(from_config);
  ASSERT_EQ(stage_input.size(), from_config.size());
  EXPECT_EQ(stage_input.back().name, from_config.back().name);
  EXPECT_DOUBLE_EQ(stage_input.back().cost, from_config.back().flops_per_sample);
}

TEST(ModelLayers, SameAsTheTaskGives) {
  const JobConfig gpt = JobConfig::parse("[model]\nn_layer = 3\n", "gpt.toml");
  expect_same_layers(gpt);
  auto model = build_model(gpt);
  const auto layers = model_layers(gpt, *model);
  ASSERT_EQ(layers.size(), 5u);  // embedding, 3 blocks, head
  EXPECT_EQ(layers[1].name, "transformer.h.0");
  EXPECT_EQ(layers.back().name, "head");

  const JobConfig mlp = JobConfig::parse("[model]\nname = \"mlp\"\nn_layers = 3\n", "mlp.toml");
  expect_same_layers(mlp);
  auto mlp_model = build_model(mlp);
  EXPECT_EQ(model_layers(mlp, *mlp_model)[2].name, "layers.2");
}

}  // namespace
}  // namespace vescale
