#include "config/config_checks.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>

#include "config/config_schema.h"
#include "core/error.h"
#include "core/suggest.h"

namespace vescale {

void check_values(const JobConfig& c) {
  VS_USER_CHECK(!c.dump_folder.empty(),
                "config {}: job.dump_folder is empty; name the folder for metrics.jsonl and "
                "checkpoints/ (\".\" for the working folder)",
                c.source);
  // A name the file system cannot hold fails only when the run first writes there (Linux: 255
  // bytes a name, 4,096 a path; the longest file inside is checkpoints/step-000000000/, ~40).
  constexpr size_t kNameMax = 255, kPathMax = 4096 - 64;
  VS_USER_CHECK(c.dump_folder.size() <= kPathMax,
                "config {}: job.dump_folder is {} bytes long, more than a path may be with the "
                "run's files in it ({}); name a shorter folder",
                c.source, c.dump_folder.size(), kPathMax);
  for (const auto& part : std::filesystem::path(c.dump_folder)) {
    VS_USER_CHECK(part.string().size() <= kNameMax,
                  "config {}: job.dump_folder has a name of {} bytes ({}...), more than the "
                  "file system's {}; name a shorter folder",
                  c.source, part.string().size(), part.string().substr(0, 24), kNameMax);
  }
  // The enumerated keys were parsed in bind_fields; the families are known only at run time.
  const std::vector<std::string> families = model_family_names();
  VS_USER_CHECK(std::find(families.begin(), families.end(), c.model) != families.end(),
                "config {}: model.name = \"{}\" is not one of {}", c.source, c.model,
                fmt::join(families, ", "));
  check_adamw_params(c);
}

void check_adamw_params(const JobConfig& c) {
  const EnumNames<ParamRole>& roles = param_role_names();
  std::vector<std::string> valid = roles.names();
  valid.erase(std::find(valid.begin(), valid.end(), roles.name(ParamRole::kHidden)));
  for (size_t i = 0; i < c.adamw_params.size(); ++i) {
    const std::string& role = c.adamw_params[i];
    VS_USER_CHECK(std::find(valid.begin(), valid.end(), role) != valid.end(),
                  "config {}: optimizer.adamw_params names \"{}\", not a role of {}{}", c.source,
                  role, choice_list(valid), did_you_mean(role, valid));
    VS_USER_CHECK(std::find(c.adamw_params.begin(), c.adamw_params.begin() + i, role) ==
                      c.adamw_params.begin() + i,
                  "config {}: optimizer.adamw_params names \"{}\" twice", c.source, role);
  }
  std::vector<std::string> quoted;
  for (const std::string& role : c.adamw_params)
    quoted.push_back(fmt::format("\"{}\"", role));
  for (const ParamRole kept : {ParamRole::kNorm, ParamRole::kBias})
    VS_USER_CHECK(std::find(c.adamw_params.begin(), c.adamw_params.end(), roles.name(kept)) !=
                      c.adamw_params.end(),
                  "config {}: optimizer.adamw_params = [{}] leaves out \"{}\": Muon "
                  "orthogonalizes matrices, and norms and biases are vectors; keep it",
                  c.source, fmt::join(quoted, ", "), roles.name(kept));
}

void check_lora(const JobConfig& c) {
  if (c.lora_rank == 0) return;
  const auto roles = c.family().lora_roles();
  VS_USER_CHECK(!roles.empty(),
                "config {}: lora.rank = {} adapts a model's projections, and model.name = \"{}\" "
                "has none LoRA can adapt; set lora.rank = 0",
                c.source, c.lora_rank, c.model);
  std::vector<std::string> valid;
  for (const auto& [role, modules] : roles)
    valid.push_back(role);
  VS_USER_CHECK(!c.lora_targets.empty(),
                "config {}: lora.targets is empty: name the projections to adapt, of {}", c.source,
                choice_list(valid));
  for (size_t i = 0; i < c.lora_targets.size(); ++i) {
    const std::string& role = c.lora_targets[i];
    VS_USER_CHECK(std::find(valid.begin(), valid.end(), role) != valid.end(),
                  "config {}: lora.targets names \"{}\", not a projection of {}: use {}{}",
                  c.source, role, c.model, choice_list(valid), did_you_mean(role, valid));
    VS_USER_CHECK(std::find(c.lora_targets.begin(), c.lora_targets.begin() + i, role) ==
                      c.lora_targets.begin() + i,
                  "config {}: lora.targets names \"{}\" twice", c.source, role);
  }
  const int64_t blocks = c.family().transformer_shape(c.model_spec())->n_layer;
  for (size_t i = 0; i < c.lora_layers.size(); ++i) {
    const int64_t layer = c.lora_layers[i];
    VS_USER_CHECK(0 <= layer && layer < blocks,
                  "config {}: lora.layers names block {}, and the model's blocks are 0 to {} "
                  "(model.n_layer = {})",
                  c.source, layer, blocks - 1, blocks);
    VS_USER_CHECK(std::find(c.lora_layers.begin(), c.lora_layers.begin() + i, layer) ==
                      c.lora_layers.begin() + i,
                  "config {}: lora.layers names block {} twice", c.source, layer);
  }
  VS_USER_CHECK(!c.checkpoint_load.empty(),
                "config {}: lora.rank = {} trains adapters on frozen weights: set checkpoint.load "
                "to the base (a checkpoint, or \"hf:DIR\" for Hugging Face weights)",
                c.source, c.lora_rank);
}

void check_combinations(const JobConfig& c) {
  VS_USER_CHECK(c.world_size() <= kMaxWorld, "config {}: {} = {} ranks, more than {}", c.source,
                c.mesh_text(), c.world_size(), kMaxWorld);
  if (!c.tp_shape.empty()) {
    VS_USER_CHECK(c.tp_shape.size() == 2 && c.tp_shape[0] >= 1 && c.tp_shape[1] >= 1 &&
                      c.tp_shape[0] <= kMaxMeshDim && c.tp_shape[1] <= kMaxMeshDim,
                  "config {}: parallel.tp_shape = [{}] must be two positive sizes, tp_a x tp_b "
                  "(or empty for a 1-D tp mesh)",
                  c.source, fmt::join(c.tp_shape, ", "));
    VS_USER_CHECK(c.tp_shape[0] * c.tp_shape[1] == c.tp,
                  "config {}: parallel.tp_shape = [{}] multiplies to {}, but parallel.tp = {}; "
                  "set parallel.tp = {}",
                  c.source, fmt::join(c.tp_shape, ", "), c.tp_shape[0] * c.tp_shape[1], c.tp,
                  c.tp_shape[0] * c.tp_shape[1]);
  }
  VS_USER_CHECK(c.dp * c.cp % c.ep == 0,
                "config {}: parallel.ep = {} is carved from the data ranks and must divide "
                "parallel.dp x parallel.cp = {} x {}",
                c.source, c.ep, c.dp, c.cp);
  VS_USER_CHECK(c.ep == 1 || c.family().experts_per_layer(c.model_spec()) > 0,
                "config {}: parallel.ep = {} shards the experts of a mixture of experts, and "
                "model.name = \"{}\" has none; set parallel.ep = 1",
                c.source, c.ep, c.model);
  VS_USER_CHECK(c.global_batch_size % (c.dp * c.microbatches) == 0,
                "config {}: training.global_batch_size = {} is not divisible by parallel.dp x "
                "parallel.microbatches "
                "= {} x {}",
                c.source, c.global_batch_size, c.dp, c.microbatches);
  c.family().check(c.model_spec());
  VS_USER_CHECK(c.activation_checkpoint == Recompute::kNone ||
                    c.family().transformer_shape(c.model_spec()).has_value(),
                "config {}: training.activation_checkpoint = \"{}\" recomputes transformer "
                "blocks, and model.name = \"{}\" has none; set it to \"none\"",
                c.source, config_name(c.activation_checkpoint), c.model);
  if (c.activation_checkpoint != Recompute::kNone) {
    const int64_t blocks = c.family().transformer_shape(c.model_spec())->n_layer;
    VS_USER_CHECK(c.activation_checkpoint_every <= blocks,
                  "config {}: training.activation_checkpoint_every = {} recomputes one block in "
                  "every {}, and the model has {} (model.n_layer): none would recompute; use 1 "
                  "to {}",
                  c.source, c.activation_checkpoint_every, c.activation_checkpoint_every, blocks,
                  blocks);
  }
  if (c.cp > 1) {
    VS_USER_CHECK(c.family().transformer_shape(c.model_spec()).has_value(),
                  "config {}: parallel.cp = {} splits the sequences of attention, and model.name = "
                  "\"{}\" has none; set parallel.cp = 1",
                  c.source, c.cp, c.model);
    VS_USER_CHECK(c.seq_len % (2 * c.cp) == 0,
                  "config {}: training.seq_len = {} does not split into 2 x parallel.cp = {} equal "
                  "chunks (each cp rank holds two, for causal load balance); use a multiple of {}",
                  c.source, c.seq_len, 2 * c.cp, 2 * c.cp);
  }
  VS_USER_CHECK(c.data_source == DataSource::kSynthetic || !c.data_path.empty(),
                "config {}: data.source = \"{}\" needs data.path", c.source,
                config_name(c.data_source));
  VS_USER_CHECK(
      c.family().objective() == Objective::kNextToken || c.data_source == DataSource::kSynthetic,
      "config {}: model.name = \"{}\" trains on data.source = \"synthetic\" only", c.source,
      c.model);
  VS_USER_CHECK(c.backend != comm::Backend::kNccl || c.device != DeviceSetting::kCpu,
                "config {}: comm.backend = \"nccl\" moves CUDA tensors, but training.device = "
                "\"cpu\": use comm.backend = \"auto\" or \"gloo\", or training.device = \"cuda\"",
                c.source);
  check_lora(c);
}

}  // namespace vescale
