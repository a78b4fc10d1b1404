#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "parallel/pipeline/stage_split.h"

namespace vescale::pipeline {
namespace {

/// A GPT-like model: a cheap embedding, `blocks` equal blocks, an expensive head.
std::vector<StageLayer> gpt_like(int blocks) {
  std::vector<StageLayer> layers{{"embedding", {"transformer.wte", "transformer.wpe"}, 1.0}};
  for (int i = 0; i < blocks; ++i) {
    const std::string name = "transformer.h." + std::to_string(i);
    layers.push_back({name, {name}, 10.0});
  }
  layers.push_back({"head", {"transformer.ln_f", "lm_head"}, 15.0});
  return layers;
}

std::vector<std::pair<int, int>> ranges(const std::vector<Stage>& stages) {
  std::vector<std::pair<int, int>> out;
  for (const auto& s : stages)
    out.emplace_back(s.begin, s.end);
  return out;
}

std::string error_of(const std::vector<StageLayer>& layers, int n_stages,
                     const std::vector<std::string>& split) {
  try {
    split_stages(layers, n_stages, split);
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(StageSplit, BalancedMinimisesTheLargestStage) {
  const auto layers = gpt_like(4);  // costs 1, 10, 10, 10, 10, 15
  const auto two = split_balanced(layers, 2);
  EXPECT_EQ(ranges(two), (std::vector<std::pair<int, int>>{{0, 4}, {4, 6}}));
  EXPECT_DOUBLE_EQ(two[0].cost, 31.0);
  EXPECT_DOUBLE_EQ(two[1].cost, 25.0);
  EXPECT_EQ(two[1].names, (std::vector<std::string>{"transformer.h.3", "head"}));
  // Four stages: no split does better than two blocks together (20); among those, earlier
  // stages take fewer layers.
  const auto four = split_balanced(layers, 4);
  EXPECT_EQ(ranges(four), (std::vector<std::pair<int, int>>{{0, 1}, {1, 3}, {3, 5}, {5, 6}}));
  // As many stages as layers: one each.
  EXPECT_EQ(split_balanced(layers, 6).size(), 6u);
  EXPECT_EQ(split_stages(layers, 2, {"balanced"})[0].end, 4);
}

TEST(StageSplit, UnevenBlocks) {
  const std::vector<StageLayer> blocks{
      {"h.0", {"h.0"}, 1}, {"h.1", {"h.1"}, 1}, {"h.2", {"h.2"}, 1}};
  EXPECT_EQ(ranges(split_balanced(blocks, 2)), (std::vector<std::pair<int, int>>{{0, 1}, {1, 3}}));
  EXPECT_EQ(ranges(split_balanced(blocks, 1)), (std::vector<std::pair<int, int>>{{0, 3}}));
}

TEST(StageSplit, ExplicitStarts) {
  const auto layers = gpt_like(4);
  const auto two = split_stages(layers, 2, {"transformer.h.2"});
  EXPECT_EQ(ranges(two), (std::vector<std::pair<int, int>>{{0, 3}, {3, 6}}));
  EXPECT_EQ(two[0].names,
            (std::vector<std::string>{"embedding", "transformer.h.0", "transformer.h.1"}));
  EXPECT_DOUBLE_EQ(two[0].cost, 21.0);
  // A layer's first module names it too.
  EXPECT_EQ(ranges(split_at(layers, 3, {"transformer.h.1", "transformer.ln_f"})),
            (std::vector<std::pair<int, int>>{{0, 2}, {2, 5}, {5, 6}}));
}

TEST(StageSplit, ErrorsSayWhatWouldWork) {
  const auto layers = gpt_like(1);  // 3 layers
  EXPECT_NE(error_of(layers, 4, {"balanced"})
                .find("4 stages (parallel.pp x parallel.pp_virtual) but the model has only 3 "
                      "layers (embedding, transformer.h.0, head)"),
            std::string::npos);
  const auto gpt = gpt_like(4);
  EXPECT_NE(error_of(gpt, 2, {"transfomer.h.2"})
                .find("'transfomer.h.2' does not start a layer (did you mean 'transformer.h.2'?)"),
            std::string::npos);
  EXPECT_NE(error_of(gpt, 3, {"transformer.h.3", "transformer.h.1"})
                .find("'transformer.h.1' comes after 'transformer.h.3'"),
            std::string::npos);
  EXPECT_NE(error_of(gpt, 3, {"transformer.h.2", "transformer.h.2"})
                .find("'transformer.h.2' comes after 'transformer.h.2'"),
            std::string::npos);
  EXPECT_NE(error_of(gpt, 3, {"transformer.h.2"})
                .find("names 1 stage starts (transformer.h.2), but 3 stages need 2"),
            std::string::npos);
  EXPECT_NE(error_of(gpt, 2, {"embedding"}).find("starts the first stage already"),
            std::string::npos);
}

}  // namespace
}  // namespace vescale::pipeline
