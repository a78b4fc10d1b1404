#include "train/checkpointing.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <numeric>
#include <set>

#include "checkpoint/step_folders.h"
#include "config/config_schema.h"
#include "config/job_config.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/logging.h"
#include "core/units.h"
#include "hf/import.h"
#include "hf/lora_base.h"
#include "hf/peft_import.h"
#include "train/model_factory.h"
#include "train/nonfinite.h"

namespace vescale {
namespace {

std::string state_name(const OptimizerStateTensor& s) {
  return "optimizer/" + s.param + "/" + s.state;
}

/// Parameter k as saved and loaded: where its state lives (ParallelModel::state), by name.
StateTensor parameter_state(const ParallelModel& model, size_t k) {
  ParameterState state = model.state(k);
  return {"model/" + model.params()[k].first, std::move(state.local), std::move(state.spec)};
}

/// The dims of `on` (a state tensor's mesh) along which ranks hold different tensors besides
/// their shards (NOTE [Dims by role]): under a pipeline each stage holds its own, so ranks along
/// pp are not replicas, and under expert parallelism each ep rank holds its own experts. By name:
/// ZeRO's pieces order the job mesh's dims their own way.
std::vector<int> held_along(const ParallelModel& model, size_t k, const DeviceMesh& on) {
  const std::vector<std::string> names = model.mesh().mesh().dim_names();
  std::vector<int> dims;
  for (int d : model.param_dims(k).held_along)
    dims.push_back(on.dim_index(names[static_cast<size_t>(d)]));
  std::sort(dims.begin(), dims.end());
  return dims;
}

/// Parameters and optimizer state, each parameter followed by its optimizer state.
std::vector<StateTensor> job_state(Job& job) {
  std::map<std::string, std::vector<OptimizerStateTensor>> by_param;
  for (auto& s : job.optimizer->state_tensors())
    by_param[s.param].push_back(s);
  const ParallelModel& model = *job.model;
  std::vector<StateTensor> state;
  for (size_t k = 0; k < model.params().size(); ++k) {
    const std::string& fqn = model.params()[k].first;
    if (!model.saves(fqn)) continue;
    state.push_back(parameter_state(model, k));
    state.back().held_along = held_along(model, k, state.back().spec.mesh);
    for (const auto& s : by_param[fqn])
      state.push_back({state_name(s), s.local, s.spec, held_along(model, k, s.spec.mesh)});
  }
  return state;
}

/// Tied parameter names and the name they are saved under.
std::map<std::string, std::string> tied_names(Module& model) {
  std::map<std::string, std::string> out;
  std::map<const Parameter*, std::string> first;
  for (const auto& [fqn, p] : model.all_parameter_names()) {
    if (!p->trainable) continue;  // a frozen base is not saved (NOTE [LoRA])
    auto [it, fresh] = first.emplace(p.get(), fqn);
    if (!fresh) out["model/" + fqn] = "model/" + it->second;
  }
  return out;
}

CheckpointMeta job_meta(const Job& job, int64_t step, const comm::Group& world) {
  CheckpointMeta meta;
  meta.run_id = job.run_id;
  meta.step = step;
  meta.seed = job.config().seed;
  meta.optimizer_steps = job.optimizer->steps();
  meta.config = job.config().text;
  meta.plan = job.config().plan;
  meta.world_size = world.size();
  meta.mesh_shape = job.model->mesh().mesh().shape();
  meta.mesh_dims = job.model->mesh().mesh().dim_names();
  meta.lora_base = job.lora_base.source;
  meta.lora_base_checksum = job.lora_base.checksum;
  return meta;
}

/// Every model/ tensor of the checkpoint must be a parameter of this model.
void check_no_strangers(const ParallelModel& model, const CheckpointReader& reader) {
  std::set<std::string> names;  // every parameter of the model, on any pipeline stage
  for (const auto& [fqn, p] : model.task().model()->named_parameters())
    names.insert(fqn);
  for (const auto& name : reader.names()) {
    if (name.rfind("model/", 0) != 0) continue;
    const bool known = names.count(name.substr(6)) > 0;
    VS_USER_CHECK(
        known,
        "[checkpoint] {}: tensor {} is not a parameter of this model (a different model config?)",
        reader.path(), name);
  }
}

/// What a load reads: a resumed run its model and optimizer, an evaluation its model only.
enum class LoadParts { kModelAndOptimizer, kModel };

/// The config keys a checkpoint must agree with: the family and its architecture keys, which
/// change the function it computes (not layout keys such as model.vocab_multiple: padding is
/// masked, and a padded vocabulary of the same rows under another tp degree is the way to reshard
/// across it), and for a resumed run the optimizer (its state), the seed (the data order and the
/// dropout masks of the steps to come) and the training keys such as dropout (the training
/// function). The keys that choose each step's rows (the seed, the global batch, the sequence
/// length) follow one rule, issue [36]: a resumed run keeps them all, since its curve is the
/// straight run's only with the same data order.
bool changes_data_order(const std::string& name) {
  return name == "training.seed" || name == "training.global_batch_size" ||
         name == "training.seq_len";
}

bool must_match(const ConfigKey& key, const std::string& model, LoadParts parts, bool adapters) {
  if (key.name == "model.name") return true;
  // A LoRA checkpoint's adapters (NOTE [LoRA]) are of their rank, targets, layers and alpha; a
  // resumed run keeps their dropout too. A base's are not compared: any LoRA job adapts it;
  // lora.adapter only starts a run.
  if (key.name.rfind("lora.", 0) == 0) {
    return adapters && key.name != "lora.adapter" &&
           (parts != LoadParts::kModel || key.name != "lora.dropout");
  }
  // Which parameters have Muon's state and which AdamW's (optimizer.adamw_params) is the
  // optimizer state's shape: a resume keeps it, as it keeps the optimizer.
  if (key.name == "optimizer.name" || key.name == "optimizer.adamw_params" ||
      changes_data_order(key.name))
    return parts != LoadParts::kModel;
  if (key.families.empty() || !key.applies_to(model)) return false;
  if (key.role == KeyRole::kLayout) return false;
  return key.role == KeyRole::kArchitecture || parts != LoadParts::kModel;
}

/// Throws, naming the key and both values, when this job's architecture (or, resuming, its
/// optimizer) is not the one the checkpoint's run recorded in its config.
void check_same_architecture(const JobConfig& config, const CheckpointReader& reader,
                             LoadParts parts) {
  const auto recorded = recorded_values(reader.meta().config);
  if (recorded.empty()) {
    log_rank0("warning: {}: its recorded config is not TOML; the model keys are not compared",
              reader.path());
    return;
  }
  const bool adapters = !reader.meta().lora_base.empty();
  for (const ConfigKey& k : config_schema()) {
    if (!must_match(k, config.model, parts, adapters)) continue;
    const std::string mine = value_text(config, k);
    const std::string theirs = recorded.at(k.name);
    VS_USER_CHECK(mine == theirs,
                  "[checkpoint] {}: {} = {} in this job's config, but the checkpoint's run was "
                  "trained with {} = {}; {} ({}, or start a new run)",
                  reader.path(), k.name, mine, k.name, theirs,
                  k.name == "optimizer.name" || k.name == "optimizer.adamw_params"
                      ? "resuming continues its optimizer state"
                  : changes_data_order(k.name)
                      ? "resuming continues its data order and dropout masks exactly (each "
                        "step's rows come from the seed, the step, the global batch and the "
                        "sequence length)"
                  : parts == LoadParts::kModel ? "the model must be the one it trained"
                                               : "a resumed run keeps its architecture",
                  fmt::format("set {} = {}", k.name, theirs));
  }
}

/// Throws unless `name` is stored with the dtype of the tensor it loads into (HDF5 would convert).
void check_dtype(const CheckpointReader& reader, const std::string& name, const at::Tensor& into) {
  const at::ScalarType stored = reader.dtype(name);
  VS_USER_CHECK(stored == into.scalar_type(),
                "[checkpoint] {}: tensor {} is stored as {} but the model's is {} (a checkpoint "
                "of another training.dtype, or an altered file?)",
                reader.path(), name, c10::toString(stored), c10::toString(into.scalar_type()));
}

/// Reads parameter `target` (saved in `state`, the training state's dtype). A bf16 parameter
/// without float32 master weights (an evaluation job) reads them and rounds, as a training job
/// rounds its masters into its parameters.
void load_parameter(const CheckpointReader& reader, StateTensor target, at::ScalarType state) {
  if (target.local.scalar_type() != state) {
    const at::Tensor rounded = target.local;
    target.local = at::empty_like(rounded, rounded.options().dtype(state));
    load_parameter(reader, target, state);
    rounded.copy_(target.local);
    return;
  }
  const std::string& name = target.name;
  VS_USER_CHECK(reader.has(name),
                "[checkpoint] {}: no tensor {} (a checkpoint of another model config?)",
                reader.path(), name);
  VS_USER_CHECK(reader.global_shape(name) == target.spec.shape,
                "[checkpoint] {}: tensor {} has shape [{}] but the model's is [{}] (a different "
                "model config?)",
                reader.path(), name, fmt::join(reader.global_shape(name), ", "),
                fmt::join(target.spec.shape, ", "));
  check_dtype(reader, name, target.local);  // after the shape: another model config says more
  target.local.copy_(reader.read_box(name, target.spec.local_offset(), target.spec.local_shape()));
}

/// Reads the optimizer state; a state tensor the checkpoint lacks (a model-only file) is an error:
/// resuming with a fresh optimizer would silently change the run.
void load_optimizer(Job& job, const CheckpointReader& reader) {
  std::vector<std::string> missing;
  auto states = job.optimizer->state_tensors();
  for (auto& s : states) {
    if (!reader.has(state_name(s))) missing.push_back(state_name(s));
  }
  VS_USER_CHECK(missing.empty(),
                "[checkpoint] {}: no optimizer state for this job's optimizer ({} of {} tensors "
                "missing, e.g. {}): a model-only checkpoint (merge --model-only?) cannot resume "
                "training; use a checkpoint saved by train",
                reader.path(), missing.size(), states.size(),
                missing.empty() ? "" : missing.front());
  for (auto& s : states) {
    const std::string name = state_name(s);
    check_dtype(reader, name, s.local);
    s.local.copy_(reader.read_box(name, s.spec.local_offset(), s.spec.local_shape()));
  }
}

/// Reads the parameters into where their state lives, after checking that the checkpoint is
/// of this model (and, resuming, of this run's optimizer and training keys).
void read_parameters(ParallelModel& model, const CheckpointReader& reader, LoadParts parts) {
  torch::autograd::AutoGradMode no_grad(false);
  check_same_architecture(model.config(), reader, parts);
  check_no_strangers(model, reader);
  for (size_t k = 0; k < model.params().size(); ++k)
    load_parameter(reader, parameter_state(model, k), state_dtype(model.config()));
}

/// Reads a LoRA model's frozen base (NOTE [LoRA]) from checkpoint `reader`, a run of this model.
void read_frozen(ParallelModel& model, const CheckpointReader& reader) {
  torch::autograd::AutoGradMode no_grad(false);
  check_same_architecture(model.config(), reader, LoadParts::kModel);
  check_no_strangers(model, reader);
  for (const auto& [fqn, param] : model.frozen()) {
    load_parameter(reader,
                   {"model/" + fqn, param->to_local(), param->spec().on_mesh(model.mesh().mesh())},
                   state_dtype(model.config()));
  }
}

void log_loaded(const CheckpointReader& reader, LoadParts parts, double seconds) {
  const CheckpointMeta& meta = reader.meta();
  log_rank0("loaded {} ({}, step {}, written by {} ranks, run {}{}) in {}", reader.path(),
            meta.format, meta.step, meta.world_size, meta.run_id.empty() ? "unknown" : meta.run_id,
            parts == LoadParts::kModel ? "; model only" : "", format_duration(seconds));
}

/// NOTE [Elastic training]: a run resumed on another layout says what changed: the mesh, the
/// micro-batches and each rank's rows (the global batch, and so the curve, are the same).
void log_layout_change(const JobConfig& c, const CheckpointMeta& meta) {
  const std::map<std::string, std::string> was = recorded_values(meta.config);
  if (was.empty()) return;
  const auto number = [&was](const char* key) { return std::stoll(was.at(key)); };
  const int64_t was_dp = number("parallel.dp");
  const int64_t was_mb = number("parallel.microbatches");
  if (meta.world_size == c.world_size() && was_dp == c.dp && was_mb == c.microbatches) return;
  const auto rows = [&](int64_t dp, int64_t mb) {
    return fmt::format("{} rows a rank, {} micro-batch{} of {}", c.global_batch_size / dp, mb,
                       mb == 1 ? "" : "es", c.global_batch_size / dp / mb);
  };
  log_rank0(
      "[resume] step {} on a new layout: {} ({} ranks; {}), saved on {} ({} ranks; {}); "
      "the global batch of {} is the same, and so is the curve",
      meta.step, c.mesh_text(), c.world_size(), rows(c.dp, c.microbatches),
      parallel_mesh_text(number("parallel.pp"), was_dp, number("parallel.cp"),
                         number("parallel.tp"), number("parallel.ep")),
      meta.world_size, rows(was_dp, was_mb), c.global_batch_size);
}

/// Rank 0's line for a committed save: the step folder's bytes over the time from the first
/// file opened to COMMIT written (files synced to disk included), and the training thread's stall.
void log_saved(const std::string& folder, const std::string& how, double write_s, double stall_s) {
  if (log_rank() != 0) return;
  const auto bytes = static_cast<double>(folder_bytes(folder));
  log_rank0("saved {} ({}): {} in {}, {:.0f} MB/s (stall {:.0f} ms)", folder, how,
            format_bytes(bytes), format_duration(write_s), bytes / 1e6 / std::max(write_s, 1e-9),
            1e3 * stall_s);
}

}  // namespace

JobCheckpointer::JobCheckpointer(Job& job, const comm::Group& world) : job_(job), world_(world) {}

void JobCheckpointer::save(int64_t step) {
  const JobConfig& c = job_.config();
  const auto start = Clock::now();
  const std::vector<StateTensor> state = job_state(job_);
  // NOTE [Non-finite steps]: never a checkpoint of a state with a NaN or inf.
  std::vector<at::Tensor> tensors;
  for (const StateTensor& s : state)
    tensors.push_back(s.local);
  if (!finite_everywhere(tensors, world_)) {
    throw DivergedError(fmt::format(
        "step {}: the parameters or optimizer state hold a NaN or inf; the checkpoint was not "
        "written (the last one in {} is intact). Lower optimizer.lr, or resume from it",
        step, c.dump_folder));
  }
  const std::string dir = checkpoints_folder(c.dump_folder).string();
  const CheckpointFormat format = c.checkpoint_format;
  const auto aliases = tied_names(job_.model->module().module());
  const CheckpointMeta meta = job_meta(job_, step, world_);
  if (!c.checkpoint_async) {
    const auto write_start = Clock::now();
    const std::string folder =
        save_checkpoint(dir, format, state, aliases, meta, world_, c.checkpoint_keep);
    log_saved(folder, checkpoint_format_name(format), seconds_since(write_start),
              seconds_since(start));
    return;
  }
  writer_.wait();  // the previous save is committed on every rank (or its failure is thrown)
  if (!writer_group_) {
    std::vector<int> ranks(static_cast<size_t>(world_.size()));
    std::iota(ranks.begin(), ranks.end(), 0);
    // Labelled "world": its (barrier-only) traffic is not a mesh dim's in the metrics.
    writer_group_ = world_.split({ranks}, "world");
  }
  auto snapshot = std::make_shared<const CheckpointSnapshot>(
      snapshot_checkpoint(dir, format, state, aliases, meta, world_, c.checkpoint_keep));
  const double stall = seconds_since(start);
  writer_.start([snapshot, group = *writer_group_, stall,
                 name = checkpoint_format_name(format) + std::string(", async")] {
    const auto write_start = Clock::now();
    write_snapshot(*snapshot, group);
    log_saved(snapshot->folder, name, seconds_since(write_start), stall);
  });
}

void JobCheckpointer::finish() {
  writer_.wait();
}

void load_lora_base(ParallelModel& model, const LoraBase& base) {
  VS_CHECK(!model.frozen().empty(), "[lora] the model has no frozen base");
  const auto start = Clock::now();
  const std::string& source = base.source;
  if (hf::is_hf_path(source)) {
    torch::autograd::AutoGradMode no_grad(false);
    hf::HFWeights weights(source, model.config());
    for (const auto& [fqn, param] : model.frozen()) {
      const DTensorSpec& spec = param->spec();
      param->to_local().copy_(
          weights.read_box(fqn, spec.shape, spec.local_offset(), spec.local_shape()));
    }
  } else {
    const CheckpointReader reader(source);
    VS_USER_CHECK(reader.meta().lora_base.empty(),
                  "[lora] {} is a LoRA run's checkpoint, not a base: resume it with "
                  "checkpoint.load, or export it merged (export --format hf --merge-lora) to "
                  "adapt the merged weights",
                  source);
    read_frozen(model, reader);
  }
  const auto elements = [](const std::vector<std::pair<std::string, DTensor*>>& params) {
    int64_t n = 0;
    for (const auto& [fqn, p] : params)
      n += p->to_local().numel();
    return n;
  };
  log_rank0(
      "[lora] base {} (CRC-32C {}) loaded in {}, frozen: {} parameters on this rank; {} of "
      "the adapters train",
      base.source, base.checksum, format_duration(seconds_since(start)), elements(model.frozen()),
      elements(model.params()));
}

void load_peft_adapter(ParallelModel& model, const std::string& folder) {
  torch::autograd::AutoGradMode no_grad(false);
  const auto start = Clock::now();
  const hf::PeftAdapter adapter(folder, model.config());
  for (size_t k = 0; k < model.params().size(); ++k) {
    const ParameterState state = model.state(k);
    at::Tensor full = adapter.read(model.params()[k].first);
    const std::vector<int64_t> offsets = state.spec.local_offset();
    const std::vector<int64_t> sizes = state.spec.local_shape();
    for (size_t d = 0; d < offsets.size(); ++d)
      full = full.narrow(static_cast<int64_t>(d), offsets[d], sizes[d]);
    state.local.copy_(full);
  }
  log_rank0("[lora] adapters from the peft folder {} in {}", folder,
            format_duration(seconds_since(start)));
}

std::optional<LoraBase> recorded_lora_base(const std::string& path) {
  if (hf::is_hf_path(path)) return std::nullopt;
  const CheckpointMeta meta = CheckpointReader(path).meta();
  if (meta.lora_base.empty()) return std::nullopt;
  return LoraBase{meta.lora_base, meta.lora_base_checksum};
}

void load_model(ParallelModel& model, const std::string& path) {
  if (!model.frozen().empty()) {
    // A LoRA model: a LoRA checkpoint's base and its adapters, or a base alone (adapters as
    // initialised: B = 0, the base's function).
    const std::optional<LoraBase> recorded = recorded_lora_base(path);
    if (!recorded) {
      load_lora_base(model, lora_base_of(path));
      if (!model.config().lora_adapter.empty()) {
        load_peft_adapter(model, model.config().lora_adapter);
      } else {
        log_rank0("[lora] {} is a base without adapters: they keep their initial values (B = 0)",
                  path);
      }
      return;
    }
    check_lora_base(*recorded, path);
    load_lora_base(model, *recorded);
  } else if (const std::optional<LoraBase> recorded = recorded_lora_base(path)) {
    VS_USER_CHECK(false,
                  "[checkpoint] {} holds LoRA adapters of the base {}: set the [lora] keys of "
                  "the run that trained it (its config is in the checkpoint: vescale-train "
                  "inspect {})",
                  path, recorded->source, path);
  }
  if (hf::is_hf_path(path)) {
    load_model_from_hf(model, path);
    return;
  }
  const auto start = Clock::now();
  const CheckpointReader reader(path);
  read_parameters(model, reader, LoadParts::kModel);
  log_loaded(reader, LoadParts::kModel, seconds_since(start));
}

void load_model_from_hf(ParallelModel& model, const std::string& path) {
  torch::autograd::AutoGradMode no_grad(false);
  const auto start = Clock::now();
  hf::HFWeights weights(path, model.config());
  for (size_t k = 0; k < model.params().size(); ++k) {
    const std::string& fqn = model.params()[k].first;
    const ParameterState state = model.state(k);
    state.local.copy_(weights.read_box(fqn, state.spec.shape, state.spec.local_offset(),
                                       state.spec.local_shape()));
  }
  log_rank0("loaded Hugging Face weights {} in {}", weights.folder(),
            format_duration(seconds_since(start)));
}

int64_t load_job(Job& job, const CheckpointReader& reader) {
  torch::autograd::AutoGradMode no_grad(false);
  const auto start = Clock::now();
  read_parameters(*job.model, reader, LoadParts::kModelAndOptimizer);
  job.after_update();
  load_optimizer(job, reader);
  job.optimizer->set_steps(reader.meta().optimizer_steps);
  job.run_id = reader.meta().run_id;  // a resumed run is the same run
  log_loaded(reader, LoadParts::kModelAndOptimizer, seconds_since(start));
  log_layout_change(job.config(), reader.meta());
  return reader.meta().step;
}

std::optional<std::string> newest_checkpoint(const std::string& dump_folder) {
  const std::filesystem::path dir = checkpoints_folder(dump_folder);
  if (committed_step_folders(dir).empty()) return std::nullopt;
  return (dir / "latest").string();
}

std::optional<std::string> resolve_load_path(const JobConfig& c) {
  if (!c.loads_latest()) {
    if (c.checkpoint_load.empty()) return std::nullopt;
    return c.checkpoint_load;
  }
  std::optional<std::string> newest = newest_checkpoint(c.dump_folder);
  if (!newest) {
    log_rank0(
        "checkpoint.load = \"latest\": {} holds no committed checkpoint yet; starting from step 0",
        checkpoints_folder(c.dump_folder).string());
  }
  return newest;
}

}  // namespace vescale
