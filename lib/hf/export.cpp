#include "hf/export.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <filesystem>
#include <functional>
#include <map>

#include "config/job_config.h"
#include "core/clock.h"
#include "core/dtype_names.h"
#include "core/error.h"
#include "core/safe_files.h"
#include "family/hf_layout.h"
#include "hf/lora_merge.h"
#include "hf/safetensors.h"

namespace vescale::hf {
namespace {

/// The entries cut into files of at most `max_bytes` each (a larger tensor alone).
std::vector<std::vector<size_t>> shards(const std::vector<TensorEntry>& entries,
                                        int64_t max_bytes) {
  std::vector<std::vector<size_t>> out(1);
  int64_t filled = 0;
  for (size_t k = 0; k < entries.size(); ++k) {
    const int64_t b = entries[k].bytes();
    if (!out.back().empty() && filled + b > max_bytes) {
      out.emplace_back();
      filled = 0;
    }
    out.back().push_back(k);
    filled += b;
  }
  return out;
}

std::string torch_dtype_name(at::ScalarType dtype) {
  return dtype_names().has(dtype) ? dtype_names().name(dtype) : c10::toString(dtype);
}

/// The parameters of a checkpoint.
ParamReader checkpoint_params(const CheckpointReader& reader) {
  return [&reader](const std::string& fqn) {
    VS_USER_CHECK(reader.has("model/" + fqn), "[export] {}: no tensor model/{}", reader.path(),
                  fqn);
    return reader.read_full("model/" + fqn);
  };
}

std::vector<at::Tensor> sources_of(const ParamReader& read, const HFTensor& t) {
  std::vector<at::Tensor> out;
  for (const std::string& source : t.sources)
    out.push_back(read(source));
  return out;
}

}  // namespace

namespace detail {

JobConfig recorded_config(const CheckpointReader& reader) {
  VS_USER_CHECK(!reader.meta().config.empty(),
                "[export] {}: the checkpoint records no config, so its model is unknown",
                reader.path());
  return JobConfig::parse(reader.meta().config, reader.path() + " (its recorded config)");
}

/// The recorded config's Hugging Face layout; throws for a family without one.
HFLayout layout_of(const CheckpointReader& reader, const JobConfig& config) {
  std::optional<HFLayout> layout = config.family().hf_layout(config.model_spec());
  VS_USER_CHECK(layout.has_value(),
                "[export] {}: model.name = '{}' has no Hugging Face counterpart to export to",
                reader.path(), config.model);
  return *layout;
}

/// Makes `folder`, which must not exist or be empty.
std::filesystem::path new_folder(const std::string& folder) {
  const std::filesystem::path dir(folder);
  VS_USER_CHECK(
      !path_taken(dir) || (std::filesystem::is_directory(dir) && std::filesystem::is_empty(dir)),
      "[export] {} exists and is not an empty folder; not overwriting it", folder);
  make_folder(dir);
  return dir;
}

}  // namespace detail

ExportReport export_hf(const CheckpointReader& reader, const std::string& folder,
                       const ExportOptions& options) {
  using namespace detail;
  const auto start = Clock::now();
  const JobConfig config = recorded_config(reader);
  const HFLayout full_layout = layout_of(reader, config);
  const HFLayout* layout = &full_layout;
  std::optional<LoraMerge> merge;
  at::ScalarType stored;
  if (config.lora_rank > 0) {
    VS_USER_CHECK(options.merge_lora,
                  "[export] {} holds LoRA adapters of the base {}: export them with --format "
                  "peft, or the base with them merged in with --format hf --merge-lora",
                  reader.path(), reader.meta().lora_base);
    merge.emplace(reader, config);
    stored = merge->dtype();
  } else {
    VS_USER_CHECK(!options.merge_lora,
                  "[export] --merge-lora: {} holds no LoRA adapters (its run had lora.rank = 0); "
                  "leave --merge-lora out",
                  reader.path());
    stored = reader.dtype("model/" + layout->tensors.at(0).sources.at(0));
  }
  const ParamReader read = merge ? merge->reader() : checkpoint_params(reader);
  const at::ScalarType dtype = options.dtype.value_or(stored);
  const std::filesystem::path dir = new_folder(folder);

  ExportReport report;
  report.architecture = layout->architecture;
  std::vector<TensorEntry> all;  // in the layout's order
  for (const HFTensor& t : layout->tensors)
    all.push_back({t.name, dtype, t.shape});
  const std::vector<std::vector<size_t>> files = shards(all, options.max_shard_bytes);
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  for (size_t f = 0; f < files.size(); ++f) {
    const std::string name =
        files.size() == 1 ? "model.safetensors"
                          : fmt::format("model-{:05d}-of-{:05d}.safetensors", f + 1, files.size());
    std::vector<TensorEntry> entries;
    for (size_t k : files[f])
      entries.push_back(all[k]);
    SafetensorsWriter writer((dir / name).string(), entries, {{"format", "pt"}});
    for (size_t k : files[f]) {
      const HFTensor& t = layout->tensors[k];
      writer.write(t.name, t.to_hf(sources_of(read, t)).to(dtype));
      weight_map[t.name] = name;
      ++report.tensors;
    }
    writer.finish();
    report.bytes += writer.bytes();
    report.files.push_back(name);
    ++report.weight_files;
  }
  if (files.size() > 1) {
    nlohmann::ordered_json index = {{"metadata", {{"total_size", report.bytes}}},
                                    {"weight_map", weight_map}};
    write_text_atomically(dir / "model.safetensors.index.json", index.dump(2) + "\n");
    report.files.push_back("model.safetensors.index.json");
  }
  nlohmann::ordered_json hf_config = layout->config;
  hf_config["torch_dtype"] = torch_dtype_name(dtype);
  write_text_atomically(dir / "config.json", hf_config.dump(2) + "\n");
  report.files.push_back("config.json");
  report.seconds = seconds_since(start);
  return report;
}

}  // namespace vescale::hf
