// `vescale-train export CHECKPOINT -o DIR --format peft`: a LoRA checkpoint's adapters as peft
// saves them (NOTE [PEFT adapters]).
#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>

#include "core/clock.h"
#include "core/error.h"
#include "core/safe_files.h"
#include "hf/export.h"
#include "hf/peft_modules.h"
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
// transformers stacks each Mixtral layer's experts into two parameters of mlp.experts,
// gate_up_proj [E, 2I, C] (an expert's w1 rows, then its w3 rows) and down_proj [E, C, I], which
// peft adapts as target_parameters (its ParamWrapper): lora_A [E R, in] holds expert e's A in
// rows e R onwards and lora_B [out, R E] its B in columns j E + e (j < R), scaled by alpha / R;
// an expert's w1 and w3 adapters are one of gate_up_proj of rank 2r, as q, k, v are one of
// c_attn. peft nests the wrappers of one module's parameters, the first it registers innermost,
// so gate_up_proj's factors are under "experts.base_layer" where down_proj is adapted too.

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
  const std::vector<PeftModule> modules = peft_modules(config, layout);
  const at::ScalarType dtype = options.dtype.value_or(
      reader.dtype("model/" + modules.front().parts.front().linear + ".lora_A.weight"));
  const std::filesystem::path dir = new_folder(folder);

  std::vector<TensorEntry> entries;
  std::vector<at::Tensor> values;
  nlohmann::ordered_json rank_pattern = nlohmann::ordered_json::object();
  nlohmann::ordered_json alpha_pattern = nlohmann::ordered_json::object();
  std::vector<std::string> targets, target_parameters;
  for (const PeftModule& m : modules) {
    // A [E rank, in]: expert e's rows e rank onwards, its parts' A's stacked; B [rows, rank E]:
    // column j E + e is column j of expert e's block-diagonal B (peft's ParamWrapper; E = 1 for
    // a module of its own).
    const int64_t rank = r * m.parts_per_expert();
    at::Tensor a, b;  // b: [rows, rank, E]
    for (const PeftPart& part : m.parts) {
      const at::Tensor pa = reader.read_full("model/" + part.linear + ".lora_A.weight");
      const at::Tensor pb = reader.read_full("model/" + part.linear + ".lora_B.weight");
      if (!a.defined()) {
        a = at::zeros({m.experts * rank, m.in}, pa.options());
        b = at::zeros({m.rows, rank, m.experts}, pb.options());
      }
      a.narrow(0, part.expert * rank + part.index * r, r).copy_(pa);
      b.select(2, part.expert)
          .narrow(0, part.row_offset, part.out)
          .narrow(1, part.index * r, r)
          .copy_(pb);
    }
    b = b.reshape({m.rows, rank * m.experts});
    const std::string prefix = "base_model.model." + m.key;
    entries.push_back({prefix + ".lora_A.weight", dtype, a.sizes().vec()});
    entries.push_back({prefix + ".lora_B.weight", dtype, b.sizes().vec()});
    values.push_back(a.to(dtype));
    values.push_back(b.to(dtype));
    // By their names in a block (every block's alike), but a stacked parameter with lora.layers:
    // target_parameters takes no layers_to_transform, so those are named in full.
    const bool in_full = m.stacked && !config.lora_layers.empty();
    const std::string target = in_full ? m.name : target_name(m.name);
    auto& list = m.stacked ? target_parameters : targets;
    if (std::find(list.begin(), list.end(), target) == list.end()) list.push_back(target);
    if (rank != r) {
      rank_pattern[short_name(m.name)] = rank;
      alpha_pattern[short_name(m.name)] = config.lora_alpha * static_cast<double>(rank / r);
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
      {"target_modules", targets},
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
  if (!target_parameters.empty()) adapter["target_parameters"] = target_parameters;
  write_text_atomically(dir / "adapter_config.json", adapter.dump(2) + "\n");
  report.files.push_back("adapter_config.json");
  report.seconds = seconds_since(start);
  return report;
}

}  // namespace vescale::hf
