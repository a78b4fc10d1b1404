// The job config: a TOML file with torchtitan-like sections, overridable on the command line as
// --section.key=value. Every key is declared once in the schema (config/config_schema.h) that
// drives parsing, type checks, overrides, "did you mean" suggestions, the effective config text
// and so the config reference (docs/configuration.md).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "config/config_enums.h"
#include "core/config_value.h"
#include "family/model_family.h"
#include "mesh/mesh_dims.h"

namespace vescale {

struct JobConfig {
  // [job]
  std::string name;
  std::string dump_folder;
  // [model]
  std::string model;     ///< the family: "gpt", "mlp"
  ModelKeys model_keys;  ///< every family's [model] keys, by name without "model."
  // [parallel]
  int64_t pp, dp, ep, cp, tp, microbatches, pp_virtual;
  /// parallel.dp = "auto": dp is the world's ranks over pp x cp x tp (NOTE [Elastic training]).
  bool dp_auto = false;
  std::vector<int64_t> tp_shape;  ///< {} (a 1-D tp mesh) or {tp_a, tp_b}, tp_a x tp_b = tp
  int64_t zero;                   ///< ZeRO stage over dp x cp: 0 (none) to 3 (parameters too)
  std::string plan;
  PpSchedule pp_schedule;
  std::vector<std::string> pp_split;  ///< {"balanced"} or the FQNs that start stages 2, 3, ...
  // [data]
  DataSource data_source;
  std::string data_path;
  std::string data_tokenizer;  ///< tokenize/tokenizer.h path; "" for the source's own
  double val_fraction;
  bool sft_pack;  ///< fine-tuning data: examples packed into windows (NOTE [Loss masks])
  // [training]
  int64_t steps, global_batch_size, seq_len, seed;
  DeviceSetting device;   ///< kAuto, kCpu or kCuda (rank r: cuda:LOCAL_RANK)
  c10::ScalarType dtype;  ///< the compute dtype; dtype_policy() says the others
  double grad_clip;
  OnNonfinite on_nonfinite;         ///< NOTE [Non-finite steps]
  int64_t max_skipped;              ///< skipped steps in a row before stopping
  Recompute activation_checkpoint;  ///< (NOTE [Recompute])
  bool fused_loss;  ///< the LM head and its cross entropy in one kernel (NOTE [Fused LM loss])
  bool fused_projections;   ///< q/k/v and gate/up as one GEMM each (NOTE [Fused projections])
  bool unverified_kernels;  ///< take CUDA kernel rows no GPU has run (NOTE [GPU-verified])
  int64_t activation_checkpoint_every;  ///< blocks k-1, 2k-1, ... (0-based) recompute
  // [optimizer]
  OptimizerKind optimizer;
  double lr, beta1, beta2, eps, weight_decay;
  double momentum;  ///< SGD's (0.9 unset), Muon's (0.95 unset)
  // Muon (NOTE [Muon])
  bool nesterov;
  int64_t ns_steps;                       ///< Newton-Schulz iterations
  MuonScale muon_scale;                   ///< the update's scale
  std::vector<std::string> adamw_params;  ///< the roles (ParamRole) that take AdamW
  // [lora] (NOTE [LoRA])
  int64_t lora_rank;  ///< 0: off
  double lora_alpha, lora_dropout;
  std::vector<std::string> lora_targets;  ///< roles (ModelFamily::lora_roles)
  std::vector<int64_t> lora_layers;       ///< blocks (0-based); empty: all
  std::string lora_adapter;               ///< a peft adapter folder to start from; "": none
  // [lr_scheduler]
  int64_t warmup_steps;
  LrDecay decay;
  double min_lr_ratio;
  // [eval]
  int64_t eval_interval, eval_windows;
  // [checkpoint]
  CheckpointFormat checkpoint_format;
  std::string checkpoint_load;
  int64_t checkpoint_interval, checkpoint_keep;
  bool checkpoint_async;      ///< write in a background thread (NOTE [Async checkpoints])
  bool checkpoint_overwrite;  ///< a new run may replace another run's steps (NOTE [Checkpoint
                              ///< integrity])
  // [metrics]
  int64_t log_interval;
  double peak_flops;
  bool tensorboard;  ///< also write TensorBoard events (NOTE [TensorBoard events])
  // [comm]
  double timeout_s;
  comm::Backend backend;
  double bucket_mb;
  int64_t flight_recorder_entries;  ///< calls each rank's flight recorder keeps (NOTE [Flight
                                    ///< recorder])
  int64_t flight_recorder_dump;     ///< every rank dumps it after this step (0: never)

  std::string source;  ///< the file it came from
  std::string text;  ///< the effective config as TOML (file + overrides), for checkpoints and logs
  std::string annotated_text;  ///< the same with each key's help as a comment

  /// Loads `path` and applies overrides ("--training.steps=20", or "--training.steps", "20"
  /// pairs already joined). Throws UserError naming file:line and key, or the override.
  /// `world`: the ranks the job runs on, which parallel.dp = "auto" divides (0: not known, and
  /// "auto" is an error).
  static JobConfig load(const std::string& path, const std::vector<std::string>& overrides = {},
                        int64_t world = 0);
  /// The same from TOML text (for tests).
  static JobConfig parse(const std::string& toml_text, const std::string& source,
                         const std::vector<std::string>& overrides = {}, int64_t world = 0);

  /// The parallel degrees as the [parallel] keys name them, outer to inner: pp, dp, cp (when
  /// more than 1), tp.
  MeshDims parallel_dims() const {
    return job_mesh_dims({{"pp", pp}, {"dp", dp}, {"cp", cp}}, {tp});
  }
  /// The job mesh's dims: parallel_dims() with tp as the tp mesh (tp_a, tp_b under tp_shape),
  /// and under expert parallelism the ep ranks carved from dp, then from cp: dp / g x ep = g and
  /// cp / (ep / g) x cp_ep = ep / g, g = gcd(ep, dp) (NOTE [Expert parallelism]).
  MeshDims mesh_dims() const;
  /// "parallel.pp x dp x tp = 1 x 2 x 2" (pp x dp x cp x tp with cp; ", ep = 2" after it with
  /// expert parallelism): the mesh as messages name it (parallel_mesh_text).
  std::string mesh_text() const;
  int64_t world_size() const { return ranks_of(parallel_dims()); }
  /// The tp mesh's sizes: tp_shape, or {tp} for a 1-D tp mesh.
  std::vector<int64_t> tp_dims() const {
    return tp_shape.empty() ? std::vector<int64_t>{tp} : tp_shape;
  }
  /// checkpoint.load = "latest": resume from the newest committed step of the dump folder.
  bool loads_latest() const { return checkpoint_load == "latest"; }
  /// The model's family (model.name).
  const ModelFamily& family() const { return model_family(model); }
  /// [lora]'s adapters (rank 0: none).
  LoraSpec lora() const { return {lora_rank, lora_alpha, lora_dropout, lora_targets, lora_layers}; }
  /// What the family builds the model from: its keys, tp, seq_len, the seed and the adapters.
  ModelSpec model_spec() const;
  /// Sequences per micro-batch on one dp rank.
  int64_t micro_batch_size() const { return global_batch_size / dp / microbatches; }
  /// What block `block` (0-based, in forward order) recomputes in its backward.
  Recompute recompute_of_block(int64_t block) const;
  /// The share of the blocks that recompute: 1 / activation_checkpoint_every, 0 with "none".
  double recomputed_share() const;
};

/// Every schema key's value in `toml_text` (a config as a checkpoint recorded it), as value_text,
/// keyed by name: the default where the text lacks the key (a version before it), nothing for keys
/// the schema no longer knows; empty when the text is not TOML. No checks across keys.
std::map<std::string, std::string> recorded_values(const std::string& toml_text);

/// The mesh of these [parallel] degrees as messages name it: "parallel.pp x dp x tp = 1 x 2 x 2",
/// pp x dp x cp x tp with cp > 1, and ", ep = 2" after it with ep > 1.
std::string parallel_mesh_text(int64_t pp, int64_t dp, int64_t cp, int64_t tp, int64_t ep);

/// "--a.b=c" and "--a.b c" forms from argv-like leftovers into "a.b=c" items; throws on others.
std::vector<std::string> collect_overrides(const std::vector<std::string>& args);

}  // namespace vescale
