// `vescale-train merge DIR -o merged.h5 [--model-only]` and `vescale-train inspect PATH
// [--verify]`.
#include <cstdio>
#include <filesystem>

#include "checkpoint/checkpoint.h"
#include "commands/commands.h"
#include "core/error.h"
#include "core/units.h"

namespace vescale::app {
namespace {

struct CheckpointOptions {
  std::string path, output;
  bool model_only = false;
  bool verify = false;
};

/// Checks every dataset's checksum and prints the verdict; corruption is a UserError (exit 2).
void verify_checkpoint(const CheckpointReader& reader) {
  int64_t checked = 0;
  const std::vector<std::string> bad = reader.verify(&checked);
  for (const auto& line : bad)
    print(fmt::format("BAD {}\n", line));
  VS_USER_CHECK(bad.empty(), "[checkpoint] {}: {} of {} datasets are damaged (listed above)",
                reader.path(), bad.size(), checked);
  print(fmt::format("verified {}: {} datasets in {} files, checksums OK\n", reader.path(), checked,
                    reader.files().size()));
}

}  // namespace

void add_checkpoint_commands(CLI::App& app, const Invocation&) {
  auto options = std::make_shared<CheckpointOptions>();
  CLI::App* merge = app.add_subcommand("merge",
                                       "Turn a sharded or deduped checkpoint into one merged HDF5 "
                                       "file (full tensors, model and optimizer)");
  merge
      ->add_option("checkpoint", options->path,
                   "Step folder, checkpoints folder (its latest), or merged .h5")
      ->required();
  merge->add_option("-o,--output", options->output, "The merged file to write")->required();
  merge->add_flag("--model-only", options->model_only, "Leave out the optimizer state");
  merge->callback([options] {
    VS_USER_CHECK(!std::filesystem::exists(std::filesystem::symlink_status(options->output)),
                  "merge: {} exists; not overwriting it", options->output);
    const CheckpointReader reader(options->path);
    const int64_t n = merge_checkpoint(reader, options->output, options->model_only);
    print(fmt::format(
        "merged {} ({}, step {}, {} files) into {}: {} tensors, {}\n", reader.path(),
        reader.meta().format, reader.meta().step, reader.files().size(), options->output, n,
        format_bytes(static_cast<double>(std::filesystem::file_size(options->output)))));
  });

  CLI::App* inspect = app.add_subcommand(
      "inspect",
      "List a checkpoint's tensors: shapes, placements, bytes, step, and its size on disk");
  inspect
      ->add_option("checkpoint", options->path,
                   "Step folder, checkpoints folder (its latest), or .h5 file")
      ->required();
  inspect->add_flag("--verify", options->verify,
                    "Also read every dataset and check its checksum; exit 2 if any is damaged");
  inspect->callback([options] {
    const CheckpointReader reader(options->path);
    if (options->verify) {
      verify_checkpoint(reader);
      return;
    }
    const auto& m = reader.meta();
    print(fmt::format(
        "{}: {} checkpoint, step {}, written by {} ranks on mesh [{}] ({}), plan '{}', run {}\n",
        reader.path(), m.format, m.step, m.world_size, fmt::join(m.mesh_shape, " x "),
        fmt::join(m.mesh_dims, ", "), m.plan, m.run_id.empty() ? "unknown" : m.run_id));
    if (!m.lora_base.empty()) {
      print(fmt::format("LoRA adapters (NOTE [LoRA]) of the base {} (CRC-32C {})\n", m.lora_base,
                        m.lora_base_checksum));
    }
    print(fmt::format("{:<56} {:<14} {:<16} {:>10}\n", "tensor", "shape", "placements", "bytes"));
    double total = 0;  // in doubles: a [2^40, 2^40] tensor's 2^80 bytes overflow an int64
    for (const auto& name : reader.names()) {
      const auto shape = reader.global_shape(name);
      double bytes = static_cast<double>(c10::elementSize(reader.dtype(name)));
      for (const int64_t d : shape)
        bytes *= static_cast<double>(d);
      total += bytes;
      print(fmt::format("{:<56} {:<14} {:<16} {:>10}\n", name,
                        fmt::format("[{}]", fmt::join(shape, ", ")), reader.placements(name),
                        format_bytes(bytes)));
    }
    for (const auto& [alias, target] : reader.aliases())
      print(fmt::format("{} -> {} (hard link)\n", alias, target));
    print(fmt::format("{} tensors, {} of state; {} on disk in {} files\n", reader.names().size(),
                      format_bytes(total),
                      format_bytes(static_cast<double>(reader.bytes_on_disk())),
                      reader.files().size()));
  });
}

}  // namespace vescale::app
