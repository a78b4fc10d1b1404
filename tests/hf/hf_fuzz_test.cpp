// Issue [26] item 4: seeded fuzzing of Hugging Face folders (config.json, the safetensors header
// and bytes, model.safetensors.index.json) through the importer a job loads "hf:DIR" with
// (HFWeights, every parameter read). Each damaged folder must be refused by name, or give finite
// parameters of the job's shapes.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "config/job_config.h"
#include "dmodule/module.h"
#include "family/hf_layout.h"
#include "hf/import.h"
#include "hf/safetensors.h"
#include "support/fuzz.h"
#include "support/mutate.h"
#include "support/training_runs.h"
#include "train/model_factory.h"

namespace vescale::hf {
namespace {

namespace fs = std::filesystem;

/// A safetensors file of `header` (JSON text) and `data`.
std::string safetensors_bytes(const std::string& header, const std::string& data) {
  const uint64_t length = header.size();
  return std::string(reinterpret_cast<const char*>(&length), 8) + header + data;
}

struct Folder {
  std::string config, header, data, index;  ///< config.json, model.safetensors, the index
};

/// The Hugging Face folder of the tiny GPT of `config`, its JSON pretty-printed (one value per
/// line) so that the mutations edit values.
Folder intact_folder(const JobConfig& config, const fs::path& scratch) {
  const HFLayout layout = *config.family().hf_layout(config.model_spec());
  std::vector<TensorEntry> entries;
  for (const HFTensor& t : layout.tensors)
    entries.push_back({t.name, at::kFloat, t.shape});
  const std::string path = (scratch / "model.safetensors").string();
  SafetensorsWriter writer(path, entries);
  nlohmann::json weight_map = nlohmann::json::object();
  for (const TensorEntry& e : entries) {
    writer.write(e.name, at::randn(e.shape, at::kFloat) * 0.02);
    weight_map[e.name] = "model.safetensors";
  }
  writer.finish();
  const std::string bytes = testing::read_bytes(path);
  uint64_t length = 0;
  std::memcpy(&length, bytes.data(), 8);
  Folder f;
  f.config = layout.config.dump(2);
  f.header = nlohmann::json::parse(bytes.substr(8, length)).dump(2);
  f.data = bytes.substr(8 + length);
  f.index =
      nlohmann::json{{"metadata", {{"total_size", f.data.size()}}}, {"weight_map", weight_map}}
          .dump(2);
  return f;
}

/// What `checkpoint.load = "hf:DIR"` does: the folder opened, every parameter read whole.
void load_like_a_job(const std::string& dir, const JobConfig& config, Module& model) {
  HFWeights weights("hf:" + dir, config);
  for (const auto& [fqn, p] : model.named_parameters()) {
    const at::Tensor t =
        weights.read_box(fqn, p->shape, std::vector<int64_t>(p->shape.size(), 0), p->shape);
    EXPECT_EQ(t.sizes().vec(), p->shape) << fqn;
    EXPECT_TRUE(at::isfinite(t).all().item<bool>()) << fqn;
  }
}

TEST(Fuzz, DamagedHuggingFaceFoldersAreRefusedByNameOrLoaded) {
  const JobConfig config = JobConfig::parse(testing::kGptRun, "gpt.toml");
  const std::shared_ptr<Module> model = build_model(config);
  const fs::path dir = testing::fresh_folder("vescale-hf-fuzz");
  fs::create_directories(dir);
  at::manual_seed(0);
  const Folder intact = intact_folder(config, dir);
  testing::Mutator mutate(20261126);
  testing::FuzzRun run("Hugging Face folder");
  for (int i = 0; i < 1200; ++i) {
    Folder f = intact;
    std::string st = safetensors_bytes(f.header, f.data);
    bool indexed = i % 7 == 3;  // the weights found through an index
    std::string what;
    switch (i % 6) {
      case 0:
      case 1:
        f.config = mutate.json(f.config, testing::hostile_json_values());
        what = "config.json";
        break;
      case 2:
      case 3:
        st = safetensors_bytes(mutate.json(f.header, testing::hostile_json_values()), f.data);
        what = "the safetensors header";
        break;
      case 4:
        if (mutate.below(2) == 0) {
          mutate.flip_byte(st, 0, 8);  // the header's length
        } else {
          mutate.flip_byte(st, 8 + f.header.size(), st.size());  // the tensors' bytes
        }
        st.resize(st.size() - (mutate.below(4) == 0 ? mutate.below(st.size()) : 0));
        what = "safetensors bytes flipped or cut";
        break;
      default:
        f.index = mutate.json(f.index, testing::hostile_json_values());
        indexed = true;
        what = "the index";
        break;
    }
    for (const auto& entry : fs::directory_iterator(dir))
      fs::remove_all(entry.path());
    testing::write_bytes((dir / "config.json").string(), f.config);
    testing::write_bytes((dir / "model.safetensors").string(), st);
    if (indexed) testing::write_bytes((dir / "model.safetensors.index.json").string(), f.index);
    run.one(std::to_string(i) + " (" + what + ")",
            f.config.size() + st.size() + (indexed ? f.index.size() : 0),
            [&] { load_like_a_job(dir.string(), config, *model); });
  }
  fs::remove_all(dir);
  run.finish(1000, 120);
}

}  // namespace
}  // namespace vescale::hf
