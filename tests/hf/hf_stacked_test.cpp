// Issue [28] point 4: Mixtral's experts are stacked in ours ([E, ...]) and one tensor per expert in
// Hugging Face's (HFTensor::row, NOTE [Hugging Face layout]). A folder written from the layout's
// to_hf reads back through HFWeights as the stacked parameters, whole or in boxes that cut the
// experts; a folder missing one expert's tensor is refused naming it; a shared expert has no
// Hugging Face counterpart.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "config/job_config.h"
#include "core/error.h"
#include "family/hf_layout.h"
#include "hf/import.h"
#include "hf/safetensors.h"
#include "support/fuzz.h"
#include "support/training_runs.h"

namespace vescale::hf {
namespace {

namespace fs = std::filesystem;

/// Writes the Hugging Face folder of `layout` to `dir` (but `skipped`): each row tensor cut from
/// `stacked`, any other tensor random.
void write_mixtral_folder(const fs::path& dir, const HFLayout& layout,
                          const std::map<std::string, at::Tensor>& stacked,
                          const std::string& skipped = "") {
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::vector<TensorEntry> entries;
  for (const HFTensor& t : layout.tensors) {
    if (t.name != skipped) entries.push_back({t.name, at::kDouble, t.shape});
  }
  SafetensorsWriter writer((dir / "model.safetensors").string(), entries);
  for (const HFTensor& t : layout.tensors) {
    if (t.name == skipped) continue;
    writer.write(t.name, t.row.has_value() ? t.to_hf({stacked.at(t.sources.at(0))})
                                           : at::randn(t.shape, at::kDouble));
  }
  writer.finish();
  testing::write_bytes((dir / "config.json").string(), layout.config.dump(2));
}

JobConfig mixtral_job(const std::string& extra = "") {
  std::string text = testing::kMixtralRun;
  const std::string key = "router_aux_loss_coef = 0.1\n";
  text.replace(text.find(key), key.size(), key + extra);
  return JobConfig::parse(text, "mixtral.toml");
}

TEST(HFStackedRows, MixtralExpertsComeBackWholeAndInBoxes) {
  const JobConfig config = mixtral_job();
  const HFLayout layout = *config.family().hf_layout(config.model_spec());
  EXPECT_EQ(layout.architecture, "MixtralForCausalLM");
  EXPECT_EQ(layout.config.at("num_local_experts"), 4);
  EXPECT_EQ(layout.config.at("num_experts_per_tok"), 2);
  at::manual_seed(0);
  std::map<std::string, at::Tensor> stacked;
  for (const HFTensor& t : layout.tensors) {
    if (!t.row.has_value() || stacked.count(t.sources.at(0))) continue;
    std::vector<int64_t> shape{4};
    shape.insert(shape.end(), t.shape.begin(), t.shape.end());
    stacked[t.sources.at(0)] = at::randn(shape, at::kDouble);
  }
  ASSERT_EQ(stacked.size(), 12u);  // 4 layers x w1, w2, w3
  const fs::path dir = testing::fresh_folder("vescale-hf-stacked");
  write_mixtral_folder(dir, layout, stacked);
  HFWeights weights("hf:" + dir.string(), config);
  for (const auto& [fqn, p] : stacked) {
    const std::vector<int64_t> shape = p.sizes().vec();
    EXPECT_TRUE(at::equal(weights.read_box(fqn, shape, {0, 0, 0}, shape), p)) << fqn;
    // Experts 1 and 2, a block of their other dims (a layout sharding the experts and more).
    const std::vector<int64_t> offsets{1, 3, 2}, sizes{2, shape[1] - 5, shape[2] - 4};
    const at::Tensor want = p.narrow(0, 1, 2).narrow(1, 3, sizes[1]).narrow(2, 2, sizes[2]);
    EXPECT_TRUE(at::equal(weights.read_box(fqn, shape, offsets, sizes), want)) << fqn;
    EXPECT_EQ(weights.read_box(fqn, shape, {4, 0, 0}, {0, shape[1], shape[2]}).numel(), 0);
  }
  fs::remove_all(dir);
}

TEST(HFStackedRows, AMissingExpertTensorAndASharedExpertAreRefusedByName) {
  const JobConfig config = mixtral_job();
  const HFLayout layout = *config.family().hf_layout(config.model_spec());
  const std::string gone = "model.layers.1.block_sparse_moe.experts.2.w3.weight";
  std::map<std::string, at::Tensor> stacked;
  for (const HFTensor& t : layout.tensors) {
    if (!t.row.has_value()) continue;
    std::vector<int64_t> shape{4};
    shape.insert(shape.end(), t.shape.begin(), t.shape.end());
    stacked[t.sources.at(0)] = at::zeros(shape, at::kDouble);
  }
  const fs::path dir = testing::fresh_folder("vescale-hf-stacked");
  write_mixtral_folder(dir, layout, stacked, gone);
  try {
    HFWeights weights("hf:" + dir.string(), config);
    ADD_FAILURE() << "a folder without " << gone << " was opened";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("no tensor " + gone), std::string::npos) << e.what();
  }
  fs::remove_all(dir);

  const JobConfig shared = mixtral_job("shared_expert = true\n");
  try {
    shared.family().hf_layout(shared.model_spec());
    ADD_FAILURE() << "a shared expert was given a Hugging Face layout";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("model.shared_expert = true"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace vescale::hf
