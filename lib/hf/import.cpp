#include "hf/import.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include "core/error.h"
#include "core/input_file.h"

namespace vescale::hf {
namespace {

nlohmann::json read_json(const std::filesystem::path& path) {
  const std::string text = read_input_file(path.string(), "Hugging Face JSON");
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw UserError(fmt::format("[hf] {}: not JSON ({})", path.string(), e.what()));
  }
}

bool same_value(const nlohmann::json& a, const nlohmann::json& b) {
  if (a.is_number() && b.is_number()) return a.get<double>() == b.get<double>();
  return a == b;
}

/// transformers 5 writes the rotary base inside "rope_parameters" ({"rope_theta": 500000.0,
/// "rope_type": "default"}) where 4.x wrote "rope_theta" and "rope_scaling" at the top: the
/// file's keys in 4.x's form, so that they are checked like any other (a base left unread would
/// run the model with the job's base, silently wrong). A rope_type other than "default" is a
/// scaled rotary embedding, which 4.x wrote as a non-null rope_scaling.
nlohmann::json with_top_level_rope(nlohmann::json file) {
  if (!file.is_object() || !file.contains("rope_parameters")) return file;
  const nlohmann::json& rope = file["rope_parameters"];
  if (!rope.is_object()) return file;
  // transformers 5 computes with rope_parameters where the file has both forms: its values win
  // over a top-level rope_theta or a null rope_scaling (an export of ours, edited).
  if (rope.contains("rope_theta")) file["rope_theta"] = rope["rope_theta"];
  const bool plain = !rope.contains("rope_type") || rope["rope_type"] == "default";
  if (!plain && (!file.contains("rope_scaling") || file["rope_scaling"].is_null()))
    file["rope_scaling"] = rope;
  else if (!file.contains("rope_scaling"))
    file["rope_scaling"] = nullptr;
  return file;
}

/// config.json against the job's model: every checked key the file has must be what the job's
/// keys make it.
void check_config(const std::string& folder, const nlohmann::json& file, const HFLayout& layout,
                  const JobConfig& config) {
  const std::string path = folder + "/config.json";
  VS_USER_CHECK(file.is_object(), "[hf] {}: not a JSON object", path);
  // The class transformers would build: every family's, ours among them, or another model.
  if (file.contains("architectures") && !file["architectures"].is_null()) {
    const nlohmann::json& classes = file["architectures"];
    const bool ours = classes.is_array() && std::find(classes.begin(), classes.end(),
                                                      layout.architecture) != classes.end();
    VS_USER_CHECK(ours,
                  "[hf] {}: architectures = {}, but model.name = '{}' is {} in Hugging Face's "
                  "layout; this folder holds another kind of model",
                  path, classes.dump(), config.model, layout.architecture);
  }
  for (const auto& [key, ours] : layout.checked_keys) {
    const auto fallback = layout.hf_defaults.find(key);
    if (!file.contains(key) && fallback == layout.hf_defaults.end()) continue;
    const bool given = file.contains(key);
    const nlohmann::json& got = given ? file[key] : fallback->second;
    const std::string shown_got =
        given ? got.dump()
              : fmt::format("{} (Hugging Face's default: the file does not set it)", got.dump());
    const nlohmann::json& want = layout.config.at(key);
    if (same_value(got, want)) continue;
    const auto also = layout.also_accepted.find(key);
    if (also != layout.also_accepted.end() && same_value(got, also->second)) continue;
    VS_USER_CHECK(got.is_number() == want.is_number() || want.is_null(),
                  "[hf] {}: {} is {}, a {}; Hugging Face writes it as {} (e.g. {})", path, key,
                  got.dump(), got.type_name(), want.is_number() ? "a number" : want.type_name(),
                  want.dump());
    // A count or size of zero or less is no model: not a value to advise.
    VS_USER_CHECK(!got.is_number() || !want.is_number() || got.get<double>() > 0,
                  "[hf] {}: {} = {} is not a {} of a model (a damaged config.json?)", path, key,
                  got.dump(), want.is_number_integer() ? "positive count" : "positive value");
    if (ours.empty()) {
      throw UserError(fmt::format(
          "[hf] {}: {} = {}, but model.name = '{}' is {} = {} in Hugging Face's layout; this "
          "folder holds another kind of model",
          path, key, shown_got, config.model, key, want.dump()));
    }
    const nlohmann::json& shown = also != layout.also_accepted.end() ? also->second : want;
    const bool settable = ours.rfind("model.", 0) == 0;
    throw UserError(fmt::format(
        "[hf] {}: {} = {}, but this job's {} = {}; the model must be the one the weights are "
        "for{}",
        path, key, shown_got, ours, shown.dump(),
        settable ? fmt::format(" (set {} = {})", ours, got.dump()) : std::string()));
  }
}

/// A tensor this model has no place for: the folder is of another model or size (a weight would
/// be dropped without a word).
void check_all_placed(const std::filesystem::path& dir,
                      const std::map<std::string, std::string>& where,
                      const std::map<std::string, std::shared_ptr<SafetensorsFile>>& placed,
                      const HFLayout& layout) {
  for (const auto& [name, file] : where) {
    if (placed.count(name)) continue;
    const bool ignored =
        std::any_of(layout.ignored_suffixes.begin(), layout.ignored_suffixes.end(),
                    [&name = name](const std::string& end) {
                      return name.size() >= end.size() &&
                             name.compare(name.size() - end.size(), end.size(), end) == 0;
                    });
    VS_USER_CHECK(ignored,
                  "[hf] {}: tensor {} has no place in this job's {} ({} tensors); a folder of "
                  "another model or size?",
                  (dir / file).string(), name, layout.architecture, layout.tensors.size());
  }
}

}  // namespace

bool is_hf_path(const std::string& path) {
  return path.rfind("hf:", 0) == 0;
}

std::string hf_folder(const std::string& path) {
  return is_hf_path(path) ? path.substr(3) : path;
}

HFWeights::HFWeights(const std::string& path, const JobConfig& config) : folder_(hf_folder(path)) {
  const std::filesystem::path dir(folder_);
  VS_USER_CHECK(std::filesystem::is_directory(dir),
                "[hf] {}: no such folder (hf:DIR names a Hugging Face model folder with "
                "config.json and model.safetensors)",
                folder_);
  std::optional<HFLayout> layout = config.family().hf_layout(config.model_spec());
  VS_USER_CHECK(layout.has_value(), "[hf] model.name = '{}' has no Hugging Face counterpart",
                config.model);
  layout_ = std::move(*layout);
  check_config(folder_, with_top_level_rope(read_json(dir / "config.json")), layout_, config);

  // The files: model.safetensors, or those the index names.
  std::map<std::string, std::shared_ptr<SafetensorsFile>> files;
  std::map<std::string, std::string> where;  // Hugging Face name -> file
  if (std::filesystem::exists(dir / "model.safetensors.index.json")) {
    const nlohmann::json index = read_json(dir / "model.safetensors.index.json");
    VS_USER_CHECK(index.contains("weight_map") && index["weight_map"].is_object(),
                  "[hf] {}/model.safetensors.index.json has no weight_map", folder_);
    for (const auto& [name, file] : index["weight_map"].items()) {
      VS_USER_CHECK(file.is_string(),
                    "[hf] {}/model.safetensors.index.json: weight_map[\"{}\"] is {}, not a file "
                    "name",
                    folder_, name, file.type_name());
      where[name] = file.get<std::string>();
    }
  } else {
    VS_USER_CHECK(std::filesystem::exists(dir / "model.safetensors"),
                  "[hf] {}: neither model.safetensors nor model.safetensors.index.json", folder_);
    files["model.safetensors"] =
        std::make_shared<SafetensorsFile>((dir / "model.safetensors").string());
    for (const std::string& name : files["model.safetensors"]->names())
      where[name] = "model.safetensors";
  }
  for (size_t k = 0; k < layout_.tensors.size(); ++k) {
    const HFTensor& t = layout_.tensors[k];
    VS_USER_CHECK(where.count(t.name), "[hf] {}: no tensor {} (a {} needs it)", folder_, t.name,
                  layout_.architecture);
    const std::string& file = where.at(t.name);
    VS_USER_CHECK(file.find('/') == std::string::npos && file.find("..") == std::string::npos,
                  "[hf] {}: the index names file '{}' outside the folder", folder_, file);
    if (!files.count(file)) files[file] = std::make_shared<SafetensorsFile>((dir / file).string());
    const TensorEntry& e = files[file]->entry(t.name);
    VS_USER_CHECK(e.shape == t.shape,
                  "[hf] {}: tensor {} has shape [{}], but this job's model needs [{}]",
                  files[file]->path(), t.name, fmt::join(e.shape, ", "), fmt::join(t.shape, ", "));
    VS_USER_CHECK(at::isFloatingType(e.dtype),
                  "[hf] {}: tensor {} holds {} integers; a weight is F32, F16, BF16 or F64",
                  files[file]->path(), t.name, c10::toString(e.dtype));
    file_of_[t.name] = files[file];
    for (size_t s = 0; s < t.sources.size(); ++s)
      sources_[t.sources[s]] = {k, s};
  }
  check_all_placed(dir, where, file_of_, layout_);
}

at::Tensor HFWeights::read_box(const std::string& fqn, const std::vector<int64_t>& shape,
                               const std::vector<int64_t>& offsets,
                               const std::vector<int64_t>& sizes) {
  const auto it = sources_.find(fqn);
  VS_USER_CHECK(it != sources_.end(), "[hf] {}: nothing there makes parameter {}", folder_, fqn);
  const auto [k, s] = it->second;
  if (cached_ != k) {
    const HFTensor& t = layout_.tensors[k];
    std::vector<std::vector<int64_t>> shapes(t.sources.size(), shape);
    cache_ = t.from_hf(read_tensor(k), shapes);
    cached_ = k;
  }
  at::Tensor full = cache_.at(s);
  VS_USER_CHECK(full.sizes().vec() == shape,
                "[hf] {}: parameter {} comes out as [{}], but this job's model has [{}] (a "
                "vocabulary larger than the model's?)",
                folder_, fqn, fmt::join(full.sizes(), ", "), fmt::join(shape, ", "));
  for (size_t d = 0; d < offsets.size(); ++d)
    full = full.narrow(static_cast<int64_t>(d), offsets[d], sizes[d]);
  return full;
}

at::Tensor HFWeights::read_tensor(size_t k) {
  const std::string& name = layout_.tensors.at(k).name;
  const at::Tensor raw = file_of_.at(name)->read(name);
  VS_USER_CHECK(at::isfinite(raw).all().item<bool>(),
                "[hf] {}: tensor {} holds NaN or infinite values; a model trained from it would "
                "only give NaN",
                file_of_.at(name)->path(), name);
  return raw;
}

}  // namespace vescale::hf
