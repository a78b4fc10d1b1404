#include "config/config_schema.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <type_traits>
#include <utility>

#include "config/toml_value.h"
#include "core/enum_names.h"
#include "core/error.h"

namespace vescale {
namespace {

/// Not deduced from the default, so `int64_t` fields take `64` and string fields `"gpt"`.
template <typename T>
struct Exactly {
  using type = T;
};

/// A schema entry whose default has its field's type; an enumerated key's default is its name.
template <typename T>
ConfigKey key(const char* name, T JobConfig::*field, typename Exactly<T>::type default_value,
              const std::string& help, std::optional<ConfigRange> range = std::nullopt) {
  if constexpr (std::is_enum_v<T>) {
    return {name, ConfigValue(std::string(config_name(default_value))), help, field, range};
  } else {
    return {name, ConfigValue(std::move(default_value)), help, field, range};
  }
}

/// The [job] keys, and model.name (the families' [model] keys follow it).
std::vector<ConfigKey> job_and_model_keys() {
  using C = JobConfig;
  return {
      key("job.name", &C::name, "vescale", "Name of the run (used in logs)"),
      key("job.dump_folder", &C::dump_folder, "outputs", "Where metrics.jsonl and checkpoints/ go"),
      key("model.name", &C::model, model_family_names().front(), choice_list(model_family_names())),
  };
}

/// The [parallel] keys: the mesh, the plan, the pipeline and ZeRO.
std::vector<ConfigKey> parallel_keys() {
  using C = JobConfig;
  return {
      key("parallel.pp", &C::pp, 1,
          "Pipeline-parallel ranks (stages are cut from the model's layers)",
          within(1, kMaxMeshDim)),
      key("parallel.dp", &C::dp, 1,
          "Data-parallel replicas, or \"auto\": the ranks the job is started on over pp x cp x "
          "tp, so that a job restarted on fewer or more ranks resumes on them (elastic training; "
          "the global batch stays, each rank's rows change)",
          within(1, kMaxMeshDim)),
      key("parallel.ep", &C::ep, 1,
          "Expert-parallel ranks, carved from the data ranks, parallel.dp x parallel.cp (which "
          "it divides), dp first: each holds model.num_experts / ep experts of every MoE layer, "
          "and tokens reach their experts by all-to-all (mixture-of-experts families)",
          within(1, kMaxMeshDim)),
      key("parallel.cp", &C::cp, 1,
          "Context-parallel ranks: each holds 2 of 2 x cp chunks of every sequence, attention runs "
          "as a ring (transformer families; training.seq_len divisible by 2 x cp)",
          within(1, kMaxMeshDim)),
      key("parallel.tp", &C::tp, 1, "Tensor-parallel degree", within(1, kMaxMeshDim)),
      key("parallel.tp_shape", &C::tp_shape, {},
          "A 2-D tp mesh tp_a x tp_b ([2, 2], multiplying to parallel.tp) for plans with two "
          "tp placements (gpt/megatron-tp-2d); empty: 1-D"),
      key("parallel.plan", &C::plan, "",
          "Sharding plan: a zoo name (gpt/megatron-sp) or a file; empty: replicate"),
      key("parallel.microbatches", &C::microbatches, 1,
          "Micro-batches per step (gradient accumulation; the pipeline's micro-batches)",
          at_least(1)),
      key("parallel.pp_schedule", &C::pp_schedule, PpSchedule::k1F1B,
          "Pipeline schedule: gpipe, 1f1b, interleaved-1f1b, zbv or zb-h1"),
      key("parallel.pp_virtual", &C::pp_virtual, 1,
          "Pipeline stages per pp rank (interleaved-1f1b: 2 or more; zbv: 2)", within(1, 1 << 10)),
      key("parallel.pp_split", &C::pp_split, {"balanced"},
          "Stages: balanced (by estimated cost), or the layers that start stages 2, 3, ... "
          "([\"transformer.h.2\"])"),
      key("parallel.zero", &C::zero, 0,
          "ZeRO over dp (dp x cp): 0 off, 1 optimizer state sharded, 2 and gradients, 3 and "
          "parameters "
          "(FSDP)",
          within(0, 3)),
  };
}

/// The [data] and [training] keys.
std::vector<ConfigKey> data_and_training_keys() {
  using C = JobConfig;
  return {
      key("data.source", &C::data_source, DataSource::kSynthetic,
          "synthetic, text (UTF-8 bytes) or tokens (nanoGPT uint16 .bin, or data prepare's)"),
      key("data.path", &C::data_path, "",
          "text: a file; tokens: a folder with train.bin and val.bin"),
      key("data.tokenizer", &C::data_tokenizer, "",
          "The tokenizer of the tokens: \"bytes\", a SentencePiece model file, a Hugging Face "
          "tokenizer.json (byte-level BPE) or a folder holding one (the one data prepare used); "
          "generate encodes --prompt with it and prints text (empty: bytes for data.source = "
          "\"text\", else a Hugging Face folder's tokenizer.json or tokenizer.model, else ids). "
          "Checked before the first step: it must open, be the one meta.json records, be "
          "\"bytes\" for data.source = \"text\", and have no more ids than the model"),
      key("data.val_fraction", &C::val_fraction, 0.1,
          "text: the last fraction of the file is the validation split", open_unit()),
      key("data.sft_pack", &C::sft_pack, true,
          "Fine-tuning data (tokens with a loss mask, data prepare --sft): pack the examples "
          "into the windows as documents are; false: each row is one example from its start, "
          "padded past its end (never trained on) and cut at training.seq_len, and validation "
          "takes the val split's examples"),
      key("training.steps", &C::steps, 100, "Optimizer steps", within(1, 1e12)),
      key("training.global_batch_size", &C::global_batch_size, 8,
          "Sequences (or MLP samples) per step, over all dp ranks", at_least(1)),
      key("training.seq_len", &C::seq_len, 64, "GPT tokens per sequence", at_least(1)),
      key("training.seed", &C::seed, 0, "Seed of init, data order and dropout"),
      key("training.device", &C::device, DeviceSetting::kAuto,
          "auto (cuda:LOCAL_RANK when a GPU is visible, else cpu), cpu or cuda (more local ranks "
          "than GPUs: cuda:(LOCAL_RANK mod GPUs), over Gloo)"),
      key("training.dtype", &C::dtype, c10::kFloat,
          "float32, float64 or bfloat16 (bf16 compute, float32 master weights and state)"),
      key("training.grad_clip", &C::grad_clip, 1.0,
          "Clip the global gradient norm to this (0: off)", at_least(0)),
      key("training.on_nonfinite", &C::on_nonfinite, OnNonfinite::kStop,
          "A NaN/inf loss or gradient norm: stop (exit 3, nothing saved) or skip the update"),
      key("training.max_skipped", &C::max_skipped, 10,
          "With on_nonfinite = skip: stop after this many skipped steps in a row", within(1, 1e12)),
      key("training.fused_loss", &C::fused_loss, true,
          "Take the LM head and its cross entropy together, rows in chunks, never keeping the "
          "[tokens, vocab] logits (NOTE [Fused LM loss]); false: logits, then cross entropy"),
      key("training.fused_projections", &C::fused_projections, true,
          "Compute q, k and v (and SwiGLU's gate and up) as one GEMM each, the parameters "
          "unchanged (NOTE [Fused projections]); false: one GEMM per projection"),
      key("training.unverified_kernels", &C::unverified_kernels, false,
          "Also take the kernel table's CUDA rows that no GPU has run yet (`vescale-train "
          "--version` lists them), the GPU's MFU peak from the device table, and ranks sharing "
          "a GPU over Gloo (NOTE [GPU-verified]); false: the next verified row runs"),
      key("training.activation_checkpoint", &C::activation_checkpoint, Recompute::kNone,
          "Recompute in the backward instead of keeping activations: none, full (a block keeps "
          "its input only and reruns its forward) or selective (the attention core keeps q, k "
          "and v only)"),
      key("training.activation_checkpoint_every", &C::activation_checkpoint_every, 1,
          "Which blocks activation_checkpoint applies to: every k-th (the k-th, 2k-th, ...; 1: "
          "all)",
          within(1, 1e12)),
  };
}

/// The [optimizer], [lr_scheduler] and [eval] keys.
std::vector<ConfigKey> optimizer_keys() {
  using C = JobConfig;
  return {
      key("optimizer.name", &C::optimizer, OptimizerKind::kAdamW,
          "adamw, sgd or muon (Muon for the hidden layers' 2-D weights, AdamW for the rest)"),
      key("optimizer.lr", &C::lr, 3e-4, "Peak learning rate", at_least(0)),
      key("optimizer.beta1", &C::beta1, 0.9, "AdamW beta1", half_open(0, 1)),
      key("optimizer.beta2", &C::beta2, 0.95, "AdamW beta2", half_open(0, 1)),
      key("optimizer.eps", &C::eps, 1e-8, "AdamW epsilon", above(0)),
      key("optimizer.weight_decay", &C::weight_decay, 0.1,
          "Decoupled weight decay (not on biases and norms)", at_least(0)),
      key("optimizer.momentum", &C::momentum, 0.9,
          "Momentum: SGD's, and Muon's, whose default is 0.95 (where the key is not set)",
          half_open(0, 1)),
      key("optimizer.nesterov", &C::nesterov, true, "Muon: Nesterov momentum"),
      key("optimizer.ns_steps", &C::ns_steps, 5,
          "Muon: Newton-Schulz iterations that orthogonalize the update", within(1, 100)),
      key("optimizer.muon_scale", &C::muon_scale, MuonScale::kAdamWRms,
          "Muon: the update's scale for a rows x cols matrix: adamw_rms, 0.2 sqrt(max(rows, "
          "cols)), AdamW's update RMS, so that optimizer.lr serves Muon and its AdamW; or shape, "
          "sqrt(max(1, rows / cols)) (Keller Jordan's, for a learning rate of its own)"),
      key("optimizer.adamw_params", &C::adamw_params,
          {"embedding", "lm_head", "norm", "bias", "router"},
          "Muon: the parameter roles that take AdamW, of embedding (the input layer: token and "
          "position embeddings, an MLP's first layer), lm_head (the output layer: the LM head, "
          "an MLP's last), norm, bias and router (norm and bias always: Muon updates matrices); "
          "the other 2-D weights, the hidden layers' (each expert's its own), take Muon"),
      key("lr_scheduler.warmup_steps", &C::warmup_steps, 0, "Linear warmup steps", within(0, 1e12)),
      key("lr_scheduler.decay", &C::decay, LrDecay::kCosine, "cosine or constant after warmup"),
      key("lr_scheduler.min_lr_ratio", &C::min_lr_ratio, 0.1,
          "Cosine floor as a fraction of optimizer.lr", within(0, 1)),
      key("eval.interval", &C::eval_interval, 0,
          "Evaluate every this many steps (0: only at the end)", within(0, 1e12)),
      key("eval.windows", &C::eval_windows, 8,
          "Validation windows of seq_len tokens (GPT) or batches (MLP)", at_least(1)),
  };
}

/// Each family's LoRA roles: "gpt: q, k, ...; llama: ...".
std::string lora_roles_text() {
  std::vector<std::string> families;
  for (const auto& family : model_families()) {
    std::vector<std::string> roles;
    for (const auto& [role, modules] : family->lora_roles())
      roles.push_back(role);
    if (!roles.empty())
      families.push_back(family->name() + ": " + fmt::format("{}", fmt::join(roles, ", ")));
  }
  return fmt::format("{}", fmt::join(families, "; "));
}

/// The [lora] keys (NOTE [LoRA]).
std::vector<ConfigKey> lora_keys() {
  using C = JobConfig;
  return {
      key("lora.rank", &C::lora_rank, 0,
          "LoRA: the adapters' rank r (0: no adapters, every weight trains); at most the smaller "
          "side of each adapted projection. A LoRA job starts from checkpoint.load (a checkpoint "
          "or \"hf:DIR\"), whose weights stay frozen",
          within(0, 1 << 20)),
      key("lora.alpha", &C::lora_alpha, 16.0,
          "LoRA: the adapters' product B A is scaled by alpha / rank", above(0)),
      key("lora.dropout", &C::lora_dropout, 0.0,
          "LoRA: dropout on each adapter's input (the same masks on every layout); 0 with "
          "Mixtral's experts in lora.targets, as peft's experts' adapters",
          half_open(0, 1)),
      key("lora.targets", &C::lora_targets, {"q", "k", "v", "o"},
          "LoRA: the projections adapted, by role (qkv: q, k and v; GPT's o is attn.c_proj, its "
          "fc and proj the MLP's c_fc and c_proj; Mixtral's w1, w2, w3 are every expert's, "
          "experts all three): " +
              lora_roles_text()),
      key("lora.layers", &C::lora_layers, std::vector<int64_t>{},
          "LoRA: the blocks adapted, 0-based (empty: all of them)"),
      key("lora.adapter", &C::lora_adapter, "",
          "LoRA: a peft adapter folder (adapter_config.json, adapter_model.safetensors) whose "
          "adapters a new run starts from instead of peft's initialization (its r, lora_alpha "
          "and modules must be this job's)"),
  };
}

/// The [checkpoint], [metrics] and [comm] keys.
std::vector<ConfigKey> checkpoint_and_run_keys() {
  using C = JobConfig;
  return {
      key("checkpoint.format", &C::checkpoint_format, CheckpointFormat::kSharded,
          "sharded, deduped or merged (HDF5)"),
      key("checkpoint.interval", &C::checkpoint_interval, 0,
          "Save every this many steps (0: never)", within(0, 1e12)),
      key("checkpoint.keep", &C::checkpoint_keep, 3,
          "Committed checkpoints kept; older ones are pruned (0: all)", within(0, 1 << 20)),
      key("checkpoint.async", &C::checkpoint_async, false,
          "Copy the state to host memory and write it in a background thread while training "
          "goes on"),
      key("checkpoint.overwrite", &C::checkpoint_overwrite, false,
          "Delete, before the first step, the committed steps this run would otherwise refuse "
          "to save beside: another run's, or its own newer than the step it resumes from (a "
          "rollback)"),
      key("checkpoint.load", &C::checkpoint_load, "",
          "Resume from: a step folder, a merged .h5, or \"latest\" (the newest committed step "
          "of <dump_folder>/checkpoints; none yet: start from step 0); or start from Hugging "
          "Face weights: \"hf:DIR\" (the optimizer fresh, step 0)"),
      key("metrics.log_interval", &C::log_interval, 10,
          "Print and record metrics every this many steps", within(1, 1e12)),
      key("metrics.peak_flops", &C::peak_flops, 0.0,
          "Peak FLOP/s per rank for MFU (0: measured matmul rate)", at_least(0)),
      key("metrics.tensorboard", &C::tensorboard, false,
          "Also write each metrics line as TensorBoard scalars (events.out.tfevents.* in the dump "
          "folder: tensorboard --logdir DUMP_FOLDER)"),
      key("comm.timeout_s", &C::timeout_s, 300.0, "Seconds any collective may take",
          within_open_lo(0, 7 * 24 * 3600)),
      key("comm.backend", &C::backend, comm::Backend::kAuto,
          "auto (nccl on CUDA, gloo on cpu and on GPUs that ranks share), gloo (CUDA tensors "
          "through host memory) or nccl"),
      key("comm.bucket_mb", &C::bucket_mb, 25.0, "Gradient all-reduce bucket size in MiB",
          within_open_lo(0, 1 << 20)),
      key("comm.flight_recorder_entries", &C::flight_recorder_entries, 4096,
          "Collectives and transfers each rank's flight recorder keeps, dumped to "
          "<dump_folder>/flight/rank-N.json when one fails or times out, on SIGUSR1, or when "
          "stuck after SIGTERM (vescale-train diagnose DUMP_FOLDER; 0: off; at most 2^20, about "
          "130 MiB a rank)",
          within(0, 1 << 20)),
      key("comm.flight_recorder_dump", &C::flight_recorder_dump, 0,
          "Every rank also dumps its flight recorder after this step (0: never)", within(0, 1e12)),
  };
}

/// The families' [model] keys as schema keys; a key that several families read is listed once.
std::vector<ConfigKey> family_keys() {
  std::vector<ConfigKey> out;
  for (const auto& family : model_families()) {
    for (const FamilyKey& fk : family->keys()) {
      const std::string name = "model." + fk.name;
      auto same =
          std::find_if(out.begin(), out.end(), [&](const ConfigKey& k) { return k.name == name; });
      if (same == out.end()) {
        out.push_back({name,
                       fk.default_value,
                       fk.help,
                       ModelKeyField{fk.name},
                       fk.range,
                       {family->name()},
                       fk.role});
        continue;
      }
      VS_CHECK(same->default_value.index() == fk.default_value.index() && same->role == fk.role,
               "[config] families {} and {} declare {} differently", same->families.at(0),
               family->name(), name);
      same->families.push_back(family->name());
    }
  }
  return out;
}

}  // namespace

bool ConfigKey::applies_to(const std::string& model) const {
  return families.empty() || std::find(families.begin(), families.end(), model) != families.end();
}

std::vector<std::string> ConfigKey::choices() const {
  return std::visit(
      [](const auto& f) -> std::vector<std::string> {
        if constexpr (std::is_member_object_pointer_v<std::decay_t<decltype(f)>>) {
          using T = std::decay_t<decltype(std::declval<JobConfig&>().*f)>;
          if constexpr (std::is_enum_v<T>) return names_of(T{}).names();
        }
        return {};
      },
      field);
}

const std::vector<ConfigKey>& config_schema() {
  static const std::vector<ConfigKey> schema = [] {
    std::vector<ConfigKey> keys;
    for (auto section : {job_and_model_keys, parallel_keys, data_and_training_keys, optimizer_keys,
                         lora_keys, checkpoint_and_run_keys}) {
      std::vector<ConfigKey> more = section();
      keys.insert(keys.end(), more.begin(), more.end());
    }
    const std::vector<ConfigKey> model_keys = family_keys();
    auto after_name = std::find_if(keys.begin(), keys.end(),
                                   [](const ConfigKey& k) { return k.name == "model.name"; });
    keys.insert(after_name + 1, model_keys.begin(), model_keys.end());
    return keys;
  }();
  return schema;
}

ConfigValue config_value(const JobConfig& c, const ConfigKey& k) {
  return std::visit(
      [&](const auto& field) -> ConfigValue {
        if constexpr (std::is_same_v<std::decay_t<decltype(field)>, ModelKeyField>) {
          return c.model_keys.at(field.name);
        } else if constexpr (std::is_enum_v<std::decay_t<decltype(c.*field)>>) {
          return std::string(config_name(c.*field));
        } else {
          return c.*field;
        }
      },
      k.field);
}

std::string value_text(const JobConfig& c, const ConfigKey& k) {
  return toml_literal(config_value(c, k));
}

}  // namespace vescale
