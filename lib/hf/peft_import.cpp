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
#include "hf/lora_merge.h"

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
  std::map<std::string, int64_t> parts;
  std::map<std::string, std::pair<int64_t, int64_t>> module_shape;  // [rows, in] of each module
  for (const auto& [linear, shape] : adapted_linears(config)) {
    const auto fused = layout->linears.find(linear);
    const HFLinear place =
        fused == layout->linears.end() ? HFLinear{linear, 0, shape[0]} : fused->second;
    places_[linear] = {place.module, place.row_offset, shape[0], parts[place.module]++, 1};
    module_shape[place.module] = {place.rows, shape[1]};
  }
  for (auto& [linear, place] : places_)
    place.parts = parts.at(place.module);

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
  for (const auto& [module, count] : parts) {
    VS_USER_CHECK(modules_in_file.count(module),
                  "[peft] {}: no adapter of {}, which this job's lora.targets and lora.layers "
                  "adapt",
                  file_->path(), module);
    const std::string prefix = kPrefix + module;
    const TensorEntry& ea = file_->entry(prefix + ".lora_A.weight");
    const TensorEntry& eb = file_->entry(prefix + ".lora_B.weight");
    VS_USER_CHECK(ea.shape.size() == 2 && eb.shape.size() == 2,
                  "[peft] {}: {}'s factors are [{}] and [{}], not matrices", file_->path(), module,
                  fmt::join(ea.shape, ", "), fmt::join(eb.shape, ", "));
    const int64_t r = ea.shape[0];
    const double r_config =
        pattern_value(adapter["rank_pattern"], module).value_or(adapter["r"].get<double>());
    const double alpha = pattern_value(adapter["alpha_pattern"], module)
                             .value_or(adapter["lora_alpha"].get<double>());
    VS_USER_CHECK(static_cast<double>(r) == r_config && eb.shape.size() == 2 && eb.shape[1] == r,
                  "[peft] {}: {}'s factors are [{}] and [{}], not of the rank {} its config "
                  "gives",
                  file_->path(), module, fmt::join(ea.shape, ", "), fmt::join(eb.shape, ", "),
                  r_config);
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
    const auto [rows, in] = module_shape.at(module);
    VS_USER_CHECK(
        ea.shape == std::vector<int64_t>({r, in}) && eb.shape == std::vector<int64_t>({rows, r}),
        "[peft] {}: {}'s factors are [{}] and [{}], and this job's model needs [{}, {}] "
        "and [{}, {}]: an adapter of another model or size?",
        file_->path(), module, fmt::join(ea.shape, ", "), fmt::join(eb.shape, ", "), r, in, rows,
        r);
    // Rows of a fused module (GPT-2's c_attn) that none of this job's projections takes must not
    // be adapted: their adapter would be dropped without a word.
    at::Tensor rest = file_->read(prefix + ".lora_B.weight").clone();
    for (const auto& [linear, place] : places_) {
      if (place.module == module) rest.narrow(0, place.row_offset, place.out).zero_();
    }
    VS_USER_CHECK(rest.abs().max().item<double>() == 0,
                  "[peft] {}: {}'s adapter also adapts outputs that this job's lora.targets do "
                  "not (a projection of the fused module without its role): name every "
                  "projection it adapts in lora.targets",
                  file_->path(), module);
    ranks_[module] = r;
  }
  for (const std::string& module : modules_in_file) {
    VS_USER_CHECK(parts.count(module),
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
  if (is_a) return file_->read(prefix + ".lora_A.weight").narrow(0, column, rank_);
  const at::Tensor b = file_->read(prefix + ".lora_B.weight");
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
