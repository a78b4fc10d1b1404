#include "hf/peft_import.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/input_file.h"
#include "family/hf_layout.h"
#include "hf/peft_modules.h"

namespace vescale::hf {
namespace {

constexpr const char* kPrefix = "base_model.model.";

/// The value of a peft pattern (rank_pattern, alpha_pattern) for `module`: the key that is its
/// name or the end of its name after a dot; nullopt: none.
std::optional<double> pattern_value(const nlohmann::json& pattern, const std::string& module) {
  if (!pattern.is_object()) return std::nullopt;
  for (const auto& [key, value] : pattern.items()) {
    const bool ends = module.size() > key.size() &&
                      module.compare(module.size() - key.size(), key.size(), key) == 0 &&
                      module[module.size() - key.size() - 1] == '.';
    if ((module == key || ends) && value.is_number()) return value.get<double>();
  }
  return std::nullopt;
}

}  // namespace

PeftAdapter::PeftAdapter(const std::string& folder, const JobConfig& config)
    : folder_(folder), rank_(config.lora_rank) {
  const std::filesystem::path dir(folder);
  const std::string config_path = (dir / "adapter_config.json").string();
  nlohmann::json adapter;
  try {
    adapter = nlohmann::json::parse(read_input_file(config_path, "peft adapter config"));
  } catch (const nlohmann::json::exception& e) {
    throw UserError(fmt::format("[peft] {}: not JSON ({})", config_path, e.what()));
  }
  VS_USER_CHECK(
      adapter.is_object() && adapter.value("peft_type", "") == "LORA",
      "[peft] {}: peft_type is {}, not \"LORA\": lora.adapter takes a LoRA adapter", config_path,
      adapter.is_object() ? adapter.value("peft_type", nlohmann::json()).dump() : "absent");
  for (const char* variant : {"use_dora", "use_rslora"}) {
    VS_USER_CHECK(!adapter.value(variant, false),
                  "[peft] {}: {} is true: a variant of LoRA this job does not compute (its "
                  "adapters are plain LoRA, scaled by alpha / r)",
                  config_path, variant);
  }
  VS_USER_CHECK(adapter.contains("r") && adapter["r"].is_number_integer() &&
                    adapter.contains("lora_alpha") && adapter["lora_alpha"].is_number(),
                "[peft] {}: no integer r or numeric lora_alpha", config_path);
  const std::optional<HFLayout> layout = config.family().hf_layout(config.model_spec());
  VS_USER_CHECK(layout.has_value(), "[peft] model.name = '{}' has no Hugging Face counterpart",
                config.model);
  const std::vector<PeftModule> modules = peft_modules(config, *layout);
  for (const PeftModule& m : modules) {
    for (const PeftPart& part : m.parts) {
      Place& place = places_[part.linear];
      place.module = m.key;
      place.row_offset = part.row_offset;
      place.out = part.out;
      place.part = part.index;
      place.parts = m.parts_per_expert();
      place.expert = part.expert;
      place.experts = m.experts;
    }
  }

  file_ = std::make_unique<SafetensorsFile>((dir / "adapter_model.safetensors").string());
  std::set<std::string> modules_in_file;
  for (const std::string& name : file_->names()) {
    const std::string a = ".lora_A.weight", b = ".lora_B.weight";
    const bool is_a =
        name.size() > a.size() && name.compare(name.size() - a.size(), a.size(), a) == 0;
    const bool is_b =
        name.size() > b.size() && name.compare(name.size() - b.size(), b.size(), b) == 0;
    VS_USER_CHECK(name.rfind(kPrefix, 0) == 0 && (is_a || is_b),
                  "[peft] {}: tensor {} is not a LoRA factor (base_model.model.<module>."
                  "lora_A.weight or .lora_B.weight)",
                  file_->path(), name);
    modules_in_file.insert(name.substr(std::string(kPrefix).size(),
                                       name.size() - std::string(kPrefix).size() - a.size()));
  }
  const double scale = config.lora().scaling();
  std::set<std::string> keys;
  for (const PeftModule& m : modules) {
    const std::string& module = m.name;
    keys.insert(m.key);
    VS_USER_CHECK(modules_in_file.count(m.key),
                  "[peft] {}: no adapter of {}, which this job's lora.targets and lora.layers "
                  "adapt",
                  file_->path(), module);
    const std::string prefix = kPrefix + m.key;
    const TensorEntry& ea = file_->entry(prefix + ".lora_A.weight");
    const TensorEntry& eb = file_->entry(prefix + ".lora_B.weight");
    VS_USER_CHECK(ea.shape.size() == 2 && eb.shape.size() == 2,
                  "[peft] {}: {}'s factors are [{}] and [{}], not matrices", file_->path(), module,
                  fmt::join(ea.shape, ", "), fmt::join(eb.shape, ", "));
    // A stacked parameter's factors hold each expert's rank-r adapter (NOTE [PEFT adapters]).
    const int64_t experts = m.experts, r = ea.shape[0] / experts;
    const double r_config =
        pattern_value(adapter["rank_pattern"], module).value_or(adapter["r"].get<double>());
    const double alpha = pattern_value(adapter["alpha_pattern"], module)
                             .value_or(adapter["lora_alpha"].get<double>());
    VS_USER_CHECK(static_cast<double>(r * experts) == static_cast<double>(ea.shape[0]) &&
                      static_cast<double>(r) == r_config && eb.shape[1] == r * experts,
                  "[peft] {}: {}'s factors are [{}] and [{}], not of the rank {} its config "
                  "gives{}",
                  file_->path(), module, fmt::join(ea.shape, ", "), fmt::join(eb.shape, ", "),
                  r_config, experts > 1 ? fmt::format(" for each of {} experts", experts) : "");
    const int64_t count = m.parts_per_expert();
    VS_USER_CHECK(r == rank_ || r == rank_ * count,
                  "[peft] {}: {}'s adapter has rank {}, and this job's lora.rank = {}{}; set "
                  "lora.rank = {}",
                  file_->path(), module, r, rank_,
                  count > 1 ? fmt::format(" ({} of our projections share it: rank {} or {})", count,
                                          rank_, rank_ * count)
                            : "",
                  count > 1 && r % count == 0 ? r / count : r);
    VS_USER_CHECK(std::abs(alpha / static_cast<double>(r) - scale) <= 1e-12 * scale,
                  "[peft] {}: {} is scaled by lora_alpha / r = {} / {}, and this job by "
                  "lora.alpha / lora.rank = {} / {}; set lora.alpha = {}",
                  file_->path(), module, alpha, r, config.lora_alpha, rank_,
                  alpha / static_cast<double>(r) * static_cast<double>(rank_));
    VS_USER_CHECK(ea.shape == std::vector<int64_t>({r * experts, m.in}) &&
                      eb.shape == std::vector<int64_t>({m.rows, r * experts}),
                  "[peft] {}: {}'s factors are [{}] and [{}], and this job's model needs [{}, {}] "
                  "and [{}, {}]: an adapter of another model or size?",
                  file_->path(), module, fmt::join(ea.shape, ", "), fmt::join(eb.shape, ", "),
                  r * experts, m.in, m.rows, r * experts);
    // Rows of a fused module (GPT-2's c_attn) that none of this job's projections takes must not
    // be adapted: their adapter would be dropped without a word.
    at::Tensor rest = file_->read(prefix + ".lora_B.weight").clone();
    for (const PeftPart& part : m.parts)
      rest.narrow(0, part.row_offset, part.out).zero_();
    VS_USER_CHECK(rest.abs().max().item<double>() == 0,
                  "[peft] {}: {}'s adapter also adapts outputs that this job's lora.targets do "
                  "not (a projection of the fused module without its role): name every "
                  "projection it adapts in lora.targets",
                  file_->path(), module);
    ranks_[m.key] = r;
  }
  for (const std::string& module : modules_in_file) {
    VS_USER_CHECK(keys.count(module),
                  "[peft] {}: it adapts {}, which this job's lora.targets and lora.layers do "
                  "not; name its role in lora.targets (and its block in lora.layers)",
                  file_->path(), module);
  }
}

at::Tensor PeftAdapter::read(const std::string& fqn) const {
  const std::string a = ".lora_A.weight";  // as long as ".lora_B.weight"
  const bool is_a = fqn.size() > a.size() && fqn.compare(fqn.size() - a.size(), a.size(), a) == 0;
  const std::string linear = fqn.substr(0, fqn.size() - a.size());
  const Place& place = places_.at(linear);
  const std::string prefix = kPrefix + place.module;
  const int64_t r = ranks_.at(place.module);
  const bool shared = r == rank_;  // one A for all the module's parts (peft's own on c_attn)
  const int64_t column = shared ? 0 : place.part * rank_;
  // Our expert's adapter of a stacked parameter: A's rows e r onwards, B's columns j E + e.
  if (is_a) {
    return file_->read(prefix + ".lora_A.weight")
        .narrow(0, place.expert * r, r)
        .narrow(0, column, rank_);
  }
  const at::Tensor stacked = file_->read(prefix + ".lora_B.weight");
  const at::Tensor b = stacked.reshape({stacked.size(0), r, place.experts}).select(2, place.expert);
  const int64_t out = place.out;
  const at::Tensor rows = b.narrow(0, place.row_offset, out);
  if (!shared) {
    // Stacked adapters: the rows of another projection's block must be zero, else this
    // projection's term would take A's other rows too.
    const at::Tensor rest =
        at::cat({rows.narrow(1, 0, column), rows.narrow(1, column + rank_, r - column - rank_)}, 1);
    VS_USER_CHECK(rest.numel() == 0 || rest.abs().max().item<double>() == 0,
                  "[peft] {}: {}'s B mixes its stacked adapters (rows {} to {} are not zero "
                  "outside their own {} columns): its product is not {} adapters of rank {}",
                  file_->path(), place.module, place.row_offset, place.row_offset + out - 1, rank_,
                  place.parts, rank_);
  }
  return rows.narrow(1, column, rank_);
}

}  // namespace vescale::hf
