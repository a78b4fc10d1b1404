// `vescale-train export CHECKPOINT -o DIR --format peft`: a LoRA checkpoint's adapters as peft
// saves them (NOTE [PEFT adapters]).
#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "core/clock.h"
#include "core/error.h"
#include "core/safe_files.h"
#include "hf/export.h"
#include "hf/lora_merge.h"
#include "hf/safetensors.h"

namespace vescale::hf {
namespace {

// NOTE [PEFT adapters]
// peft names an adapter's factors after the Hugging Face module they adapt,
// base_model.model.<module>.lora_A.weight [r, in] and .lora_B.weight [out, r], and scales their
// product by lora_alpha / r (rank_pattern and alpha_pattern give a module its own). Where our
// Linear is the Hugging Face module of the same name (Llama, Mixtral, GPT-2's c_proj and c_fc),
// the adapter is written as it is. GPT-2 fuses q, k and v into one c_attn of 3C outputs: the
// adapters of those of q, k, v that have one are one adapter of c_attn of rank n r, A their A's
// stacked and B block-diagonal (each B in its projection's rows and its own r columns), alpha
// n alpha, so that the scale is the same and x A^T B^T gives each projection its own term. GPT-2's
// Conv1D modules take peft's fan_in_fan_out; their adapters are Linears all the same.

/// One Hugging Face module's adapter, made of ours.
struct PeftModule {
  std::string name;                                    ///< Hugging Face's module
  int64_t rows = 0;                                    ///< its outputs
  std::vector<std::pair<std::string, int64_t>> parts;  ///< our Linears and their row offsets
};

std::string short_name(const std::string& module) {
  const size_t dot = module.rfind('.');
  return dot == std::string::npos ? module : module.substr(dot + 1);
}

/// The module's role in target_modules: its name, with its parent's where another module of
/// the same name is not adapted alike (GPT-2's attn.c_proj and mlp.c_proj).
std::string target_name(const std::string& module) {
  const size_t last = module.rfind('.');
  const size_t parent = module.rfind('.', last - 1);
  return module.substr(parent + 1);
}

}  // namespace

ExportReport export_peft(const CheckpointReader& reader, const std::string& folder,
                         const ExportOptions& options) {
  using namespace detail;
  const auto start = Clock::now();
  const JobConfig config = recorded_config(reader);
  VS_USER_CHECK(config.lora_rank > 0,
                "[export] --format peft: {} holds no LoRA adapters (its run had lora.rank = 0); "
                "export it with --format hf",
                reader.path());
  VS_USER_CHECK(!options.merge_lora,
                "[export] --merge-lora goes with --format hf (the merged weights); --format peft "
                "writes the adapters alone");
  const HFLayout layout = layout_of(reader, config);
  const int64_t r = config.lora_rank;
  std::vector<PeftModule> modules;
  std::map<std::string, size_t> index;
  for (const auto& [linear, shape] : adapted_linears(config)) {
    const auto fused = layout.linears.find(linear);
    const HFLinear place =
        fused == layout.linears.end() ? HFLinear{linear, 0, shape[0]} : fused->second;
    auto [it, fresh] = index.emplace(place.module, modules.size());
    if (fresh) modules.push_back({place.module, place.rows, {}});
    modules[it->second].parts.emplace_back(linear, place.row_offset);
  }
  const at::ScalarType dtype = options.dtype.value_or(
      reader.dtype("model/" + modules.front().parts.front().first + ".lora_A.weight"));
  const std::filesystem::path dir = new_folder(folder);

  std::vector<TensorEntry> entries;
  std::vector<at::Tensor> values;
  nlohmann::ordered_json rank_pattern = nlohmann::ordered_json::object();
  nlohmann::ordered_json alpha_pattern = nlohmann::ordered_json::object();
  std::vector<std::string> targets;
  for (const PeftModule& m : modules) {
    std::vector<at::Tensor> as;
    const int64_t rank = r * static_cast<int64_t>(m.parts.size());
    at::Tensor b;
    for (size_t j = 0; j < m.parts.size(); ++j) {
      const auto& [linear, offset] = m.parts[j];
      as.push_back(reader.read_full("model/" + linear + ".lora_A.weight"));
      const at::Tensor part = reader.read_full("model/" + linear + ".lora_B.weight");
      if (!b.defined()) b = at::zeros({m.rows, rank}, part.options());
      b.narrow(0, offset, part.size(0)).narrow(1, static_cast<int64_t>(j) * r, r).copy_(part);
    }
    const at::Tensor a = at::cat(as, 0);
    const std::string prefix = "base_model.model." + m.name;
    entries.push_back({prefix + ".lora_A.weight", dtype, a.sizes().vec()});
    entries.push_back({prefix + ".lora_B.weight", dtype, b.sizes().vec()});
    values.push_back(a.to(dtype));
    values.push_back(b.to(dtype));
    const std::string target = target_name(m.name);
    if (std::find(targets.begin(), targets.end(), target) == targets.end())
      targets.push_back(target);
    if (rank != r) {
      rank_pattern[short_name(m.name)] = rank;
      alpha_pattern[short_name(m.name)] = config.lora_alpha * static_cast<double>(m.parts.size());
    }
  }
  ExportReport report;
  report.architecture = layout.architecture + " adapter (peft LoRA)";
  SafetensorsWriter writer((dir / "adapter_model.safetensors").string(), entries,
                           {{"format", "pt"}});
  for (size_t k = 0; k < entries.size(); ++k) {
    writer.write(entries[k].name, values[k]);
    ++report.tensors;
  }
  writer.finish();
  report.bytes = writer.bytes();
  report.weight_files = 1;
  report.files.push_back("adapter_model.safetensors");
  nlohmann::ordered_json adapter = {
      {"peft_type", "LORA"},
      {"task_type", "CAUSAL_LM"},
      {"base_model_name_or_path", nullptr},
      {"r", r},
      {"lora_alpha", config.lora_alpha},
      {"lora_dropout", config.lora_dropout},
      {"target_modules", targets},  // by their names in a block: every block's alike
      {"layers_to_transform", config.lora_layers.empty()
                                  ? nlohmann::ordered_json(nullptr)
                                  : nlohmann::ordered_json(config.lora_layers)},
      {"fan_in_fan_out", layout.conv1d},
      {"bias", "none"},
      {"use_rslora", false},
      {"use_dora", false},
      {"init_lora_weights", true},
      {"rank_pattern", rank_pattern},
      {"alpha_pattern", alpha_pattern},
      {"modules_to_save", nullptr},
      {"inference_mode", true}};
  write_text_atomically(dir / "adapter_config.json", adapter.dump(2) + "\n");
  report.files.push_back("adapter_config.json");
  report.seconds = seconds_since(start);
  return report;
}

}  // namespace vescale::hf
