// `vescale-train export CHECKPOINT -o DIR --format hf`: a checkpoint as a Hugging Face model.
#include <fmt/format.h>

#include <optional>
#include <string>

#include "checkpoint/checkpoint_reader.h"
#include "commands/commands.h"
#include "core/dtype_names.h"
#include "core/error.h"
#include "core/suggest.h"
#include "core/units.h"
#include "hf/export.h"
#include "train/metrics.h"

namespace vescale::app {
namespace {

struct ExportCommandOptions {
  std::string path, output, format = "hf", dtype, max_shard_size = "5GiB";
  bool merge_lora = false;
};

std::optional<at::ScalarType> parse_dtype(const std::string& name) {
  if (name.empty()) return std::nullopt;
  if (auto dtype = dtype_names().find(name)) return dtype;
  throw UserError(
      fmt::format("export: --dtype {} is not one of {} (or leave it out: the checkpoint's){}", name,
                  dtype_names().choices(), did_you_mean(name, dtype_names().names())));
}

}  // namespace

void add_export_command(CLI::App& app, const Invocation&) {
  auto options = std::make_shared<ExportCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "export",
      "Write a checkpoint as a Hugging Face model folder: config.json and safetensors weights "
      "(GPT2LMHeadModel for gpt, LlamaForCausalLM for llama, MixtralForCausalLM for mixtral), "
      "tensor by tensor; a LoRA run's checkpoint as peft's adapter folder, or merged into its "
      "base");
  cmd->add_option("checkpoint", options->path,
                  "Step folder, checkpoints folder (its latest), or merged .h5 (any layout)")
      ->required();
  cmd->add_option("-o,--output", options->output, "The folder to write (new or empty)")->required();
  cmd->add_option("--format", options->format,
                  "hf (Hugging Face safetensors) or peft (a LoRA checkpoint's adapters: "
                  "adapter_model.safetensors and adapter_config.json, for its base exported "
                  "with --format hf)")
      ->capture_default_str();
  cmd->add_flag("--merge-lora", options->merge_lora,
                "With --format hf, a LoRA checkpoint: its base's weights with the adapters merged "
                "in (W + alpha / rank x B A)");
  cmd->add_option("--dtype", options->dtype,
                  dtype_names().choices() + " (default: the checkpoint's)");
  cmd->add_option("--max-shard-size", options->max_shard_size,
                  "Largest safetensors file (5GiB, 512M, ...); past it the weights are split into "
                  "model-0000k-of-0000n.safetensors with an index")
      ->capture_default_str();
  cmd->callback([options] {
    VS_USER_CHECK(options->format == "hf" || options->format == "peft",
                  "export: --format {} is not known; use hf or peft{}", options->format,
                  did_you_mean(options->format, {"hf", "peft"}));
    hf::ExportOptions o;
    o.merge_lora = options->merge_lora;
    o.dtype = parse_dtype(options->dtype);
    o.max_shard_bytes = parse_bytes(options->max_shard_size, "--max-shard-size");
    VS_USER_CHECK(o.max_shard_bytes > 0,
                  "export: --max-shard-size {} must be more than 0 bytes (e.g. 5GiB, the default)",
                  options->max_shard_size);
    const CheckpointReader reader(options->path);
    const hf::ExportReport r = options->format == "peft"
                                   ? hf::export_peft(reader, options->output, o)
                                   : hf::export_hf(reader, options->output, o);
    print(fmt::format(
        "exported {} (step {}) as {} to {}: {} tensors, {} in {} safetensors file{}, {} ({:.0f} "
        "MB/s), peak RSS {}\n",
        reader.path(), reader.meta().step, r.architecture, options->output, r.tensors,
        format_bytes(static_cast<double>(r.bytes)), r.weight_files, r.weight_files == 1 ? "" : "s",
        format_duration(r.seconds), static_cast<double>(r.bytes) / 1e6 / std::max(r.seconds, 1e-9),
        format_bytes(static_cast<double>(peak_resident_bytes()))));
  });
}

}  // namespace vescale::app
