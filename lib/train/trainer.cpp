#include "train/trainer.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <chrono>
#include <filesystem>

#include "checkpoint/checkpoint.h"
#include "core/error.h"
#include "core/logging.h"
#include "core/units.h"
#include "data/regression_data.h"
#include "data/token_data.h"
#include "dmodule/parallelize.h"
#include "dtensor/ops.h"
#include "models/gpt.h"
#include "models/mlp.h"
#include "optim/adamw.h"
#include "optim/optimizer.h"
#include "parallel/data_parallel.h"
#include "train/metrics.h"
#include "train/model_factory.h"

namespace vescale {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// Everything one rank trains with.
struct Job {
  Job(JobConfig c, DeviceMesh m) : config(std::move(c)), mesh(m), tp_mesh(m["tp"]) {}
  JobConfig config;
  DeviceMesh mesh;
  DeviceMesh tp_mesh;
  int64_t dp_rank = 0;
  at::ScalarType dtype = at::kFloat;
  std::shared_ptr<Module> model;
  models::GPT* gpt = nullptr;
  std::unique_ptr<ParallelizedModule> pm;
  std::unique_ptr<DataParallel> dp;
  std::unique_ptr<Optimizer> optimizer;
  std::vector<DTensor*> params;
  TokenData tokens;
  std::unique_ptr<TeacherRegression> regression;
  double flops_per_sample = 0;  ///< per sequence (GPT) or sample (MLP), forward + backward
};

Placements replicated(const DeviceMesh& mesh) {
  return Placements(mesh.ndim(), Placement::replicate());
}

/// The model's mean loss on a batch: GPT token ids and targets, or MLP inputs and targets.
DTensor batch_loss(Job& job, const at::Tensor& x, const at::Tensor& y) {
  const Placements r = replicated(job.tp_mesh);
  if (job.gpt) {
    DTensor idx = distribute_tensor(x, job.tp_mesh, r);
    DTensor targets = distribute_tensor(y, job.tp_mesh, r);
    return (*job.model)({idx, targets}).at(0);
  }
  DTensor d = ops::sub((*job.model)(distribute_tensor(x.to(job.dtype), job.tp_mesh, r)),
                       distribute_tensor(y.to(job.dtype), job.tp_mesh, r));
  return ops::mean(ops::mul(d, d)).redistribute(r);
}

/// The mean loss of one micro-batch (rows `slice` of step `step`), as a Replicate scalar.
DTensor micro_batch_loss(Job& job, int64_t step, const BatchSlice& slice) {
  const JobConfig& c = job.config;
  if (!job.gpt) {
    auto [x, y] = job.regression->batch(step, slice);
    return batch_loss(job, x, y);
  }
  auto& dropout = job.gpt->dropout_state();
  dropout.training = true;
  dropout.counter = static_cast<uint64_t>(step);
  dropout.row_offset = slice.row_offset;
  dropout.global_rows = slice.global_rows;
  auto [x, y] = token_batch(*job.tokens.train, c.seed, step, c.seq_len, slice);
  return batch_loss(job, x, y);
}

/// Validation loss: GPT over the first eval.windows windows of the val split (mean token cross
/// entropy), MLP over eval.windows validation batches; windows are spread over dp ranks.
double evaluate(Job& job) {
  const JobConfig& c = job.config;
  torch::autograd::AutoGradMode no_grad(false);
  double sum = 0, count = 0;
  int64_t windows = c.eval_windows;
  if (job.gpt) {
    windows = std::min(windows, val_windows_available(*job.tokens.val, c.seq_len));
    job.gpt->dropout_state().training = false;
  }
  for (int64_t w = job.dp_rank; w < windows; w += c.dp) {
    auto [x, y] = job.gpt ? val_window(*job.tokens.val, w, c.seq_len)
                          : job.regression->val_batch(w, c.micro_batch_size());
    sum += batch_loss(job, x, y).to_local().item<double>();
    count += 1;
  }
  at::Tensor totals = at::tensor({sum, count}, at::kDouble);
  job.mesh.group("dp").all_reduce(totals, comm::ReduceOp::kSum);
  return totals[0].item<double>() / std::max(1.0, totals[1].item<double>());
}

/// The spec of a tp-mesh DTensor on the full job mesh (Replicate over pp and dp).
DTensorSpec on_job_mesh(const Job& job, const DTensor& value) {
  Placements p{Placement::replicate(), Placement::replicate()};
  p.insert(p.end(), value.placements().begin(), value.placements().end());
  return DTensorSpec(job.mesh, p, value.shape());
}

/// The training state as checkpoint tensors: parameters and optimizer state.
std::vector<StateTensor> job_state(Job& job) {
  std::vector<StateTensor> state;
  const auto& params = job.pm->parameters();
  for (size_t k = 0; k < params.size(); ++k) {
    const DTensor& value = params[k].second->get();
    const DTensorSpec spec = on_job_mesh(job, value);
    state.push_back({"model/" + params[k].first, value.to_local().detach(), spec});
    for (const auto& name : job.optimizer->state_names()) {
      state.push_back(
          {"optimizer/" + params[k].first + "/" + name, job.optimizer->state(k, name), spec});
    }
  }
  return state;
}

/// Tied parameter names and the name they are saved under.
std::map<std::string, std::string> tied_names(Job& job) {
  std::map<std::string, std::string> out;
  std::map<const Parameter*, std::string> first;
  for (const auto& [fqn, p] : job.model->all_parameter_names()) {
    auto [it, fresh] = first.emplace(p.get(), fqn);
    if (!fresh) out["model/" + fqn] = "model/" + it->second;
  }
  return out;
}

/// Loads parameters (and optimizer state when the checkpoint has it) into this rank's shards,
/// reading only the hyperslabs it holds. Returns the step to continue from.
int64_t load_state(Job& job, const CheckpointReader& reader) {
  torch::autograd::AutoGradMode no_grad(false);
  const auto start = Clock::now();
  const auto& params = job.pm->parameters();
  for (const auto& name : reader.names()) {
    if (name.rfind("model/", 0) != 0) continue;
    const std::string fqn = name.substr(6);
    const bool known =
        std::any_of(params.begin(), params.end(), [&](const auto& p) { return p.first == fqn; });
    VS_USER_CHECK(
        known,
        "[checkpoint] {}: tensor {} is not a parameter of this model (a different model config?)",
        reader.path(), name);
  }
  bool has_optimizer = true;
  for (size_t k = 0; k < params.size(); ++k) {
    DTensor& value = params[k].second->get();
    const std::string name = "model/" + params[k].first;
    VS_USER_CHECK(reader.has(name),
                  "[checkpoint] {}: no tensor {} (a checkpoint of another model config?)",
                  reader.path(), name);
    VS_USER_CHECK(reader.global_shape(name) == value.shape(),
                  "[checkpoint] {}: tensor {} has shape [{}] but the model's is [{}] (a different "
                  "model config?)",
                  reader.path(), name, fmt::join(reader.global_shape(name), ", "),
                  fmt::join(value.shape(), ", "));
    const auto offsets = value.spec().local_offset();
    const auto sizes = value.spec().local_shape();
    value.to_local().copy_(reader.read_box(name, offsets, sizes));
    for (const auto& state : job.optimizer->state_names()) {
      const std::string sname = "optimizer/" + params[k].first + "/" + state;
      if (!reader.has(sname)) {
        has_optimizer = false;
        continue;
      }
      job.optimizer->state(k, state).copy_(reader.read_box(sname, offsets, sizes));
    }
  }
  job.optimizer->set_steps(has_optimizer ? reader.meta().optimizer_steps : 0);
  log_rank0("loaded {} ({}, step {}, written by {} ranks{}) in {}", reader.path(),
            reader.meta().format, reader.meta().step, reader.meta().world_size,
            has_optimizer ? "" : "; model only: the optimizer starts fresh",
            format_duration(seconds_since(start)));
  return reader.meta().step;
}

std::string resolve_load_path(const JobConfig& c) {
  if (c.checkpoint_load == "latest")
    return (std::filesystem::path(c.dump_folder) / "checkpoints" / "latest").string();
  return c.checkpoint_load;
}

Job build_job(const JobConfig& c, const comm::Group& world) {
  VS_USER_CHECK(c.world_size() == world.size(),
                "config {}: the mesh parallel.pp x dp x tp = {} x {} x {} needs {} processes, but "
                "{} are running",
                c.source, c.pp, c.dp, c.tp, c.world_size(), world.size());
  DeviceMesh mesh(world, MeshSpec{{c.pp, c.dp, c.tp}, {"pp", "dp", "tp"}});
  Job job(c, mesh);
  job.dp_rank = mesh.coordinate()[1];
  job.dtype = c.dtype == "float64" ? at::kDouble : at::kFloat;

  job.model = build_model(c);
  if (c.model == "gpt") {
    if (c.data_source == "text") job.tokens = load_text_tokens(c.data_path, c.val_fraction);
    if (c.data_source == "tokens") job.tokens = load_bin_tokens(c.data_path);
    if (c.data_source == "synthetic")
      job.tokens = synthetic_tokens(c.vocab_size, static_cast<uint64_t>(c.seed));
    VS_USER_CHECK(job.tokens.vocab_size <= c.vocab_size,
                  "config {}: data {} has tokens up to {} but model.vocab_size = {}", c.source,
                  job.tokens.description, job.tokens.vocab_size - 1, c.vocab_size);
    job.gpt = static_cast<models::GPT*>(job.model.get());
  } else {
    job.regression =
        std::make_unique<TeacherRegression>(c.d_in, c.d_out, static_cast<uint64_t>(c.seed));
  }
  const Plan plan = job_plan(c);
  ParallelizeOptions options;
  options.dtype = job.dtype;
  options.seed = static_cast<uint64_t>(c.seed);
  options.bucket_bytes = static_cast<int64_t>(c.bucket_mb * (1 << 20));
  job.pm = parallelize_module(job.model, job.tp_mesh, plan, options);

  std::vector<std::pair<std::string, DTensor*>> named;
  int64_t n_params = 0;
  for (auto& [fqn, p] : job.pm->parameters()) {
    named.emplace_back(fqn, &p->get());
    job.params.push_back(&p->get());
    n_params += c10::multiply_integers(p->shape);
  }
  job.dp = std::make_unique<DataParallel>(job.params, mesh.group("dp"), options.bucket_bytes);
  if (c.optimizer == "adamw") {
    job.optimizer =
        std::make_unique<AdamW>(named, AdamWOptions{c.lr, c.beta1, c.beta2, c.eps, c.weight_decay});
  } else {
    job.optimizer = std::make_unique<SGD>(named, SGDOptions{c.momentum, c.weight_decay});
  }
  // 6 N per token for matmuls forward and backward, plus attention's 12 L C T.
  job.flops_per_sample = job.gpt ? static_cast<double>(c.seq_len) *
                                       (6.0 * n_params + 12.0 * c.n_layer * c.n_embd * c.seq_len)
                                 : 6.0 * n_params;
  log_rank0("{}: {} with {} parameters on {} ({} plan), {}, {}", c.name, job.model->type(),
            n_params, mesh.str(), c.plan.empty() ? "replicate" : c.plan, c.dtype,
            job.gpt ? job.tokens.description : std::string("teacher regression"));
  return job;
}

}  // namespace

TrainSummary run_training(const JobConfig& c, const comm::Group& world) {
  Job job = build_job(c, world);
  const bool rank0 = world.rank() == 0;
  const std::string metrics_path =
      (std::filesystem::path(c.dump_folder) / "metrics.jsonl").string();
  MetricsWriter writer(rank0 ? metrics_path : "");
  const double peak = c.peak_flops > 0 ? c.peak_flops : measured_peak_flops();
  const double samples_per_step = static_cast<double>(c.global_batch_size);
  const double tokens_per_step =
      samples_per_step * (job.gpt ? static_cast<double>(c.seq_len) : 1.0);
  comm::CommStats& stats = world.stats();

  int64_t start_step = 0;
  if (!c.checkpoint_load.empty())
    start_step = load_state(job, CheckpointReader(resolve_load_path(c)));
  VS_USER_CHECK(start_step < c.steps,
                "config {}: the checkpoint is at step {}, not before training.steps = {}", c.source,
                start_step, c.steps);
  const std::string checkpoint_dir =
      (std::filesystem::path(c.dump_folder) / "checkpoints").string();

  TrainSummary summary;
  summary.first_val_loss = evaluate(job);
  log_rank0("step {}/{} | val_loss {:.4f}", start_step, c.steps, summary.first_val_loss);
  const auto start = Clock::now();
  Clock::time_point timed_start;
  for (int64_t step = start_step; step < c.steps; ++step) {
    const auto step_start = Clock::now();
    if (step == start_step + 1) timed_start = step_start;
    const auto bytes_before = stats.bytes_by_label();
    const double lr =
        lr_at(step, c.steps, c.lr, c.warmup_steps, c.decay == "cosine", c.min_lr_ratio);
    job.pm->zero_grad();
    double loss_sum = 0;
    for (int64_t micro = 0; micro < c.microbatches; ++micro) {
      const BatchSlice slice =
          batch_slice(c.global_batch_size, c.dp, job.dp_rank, c.microbatches, micro);
      DTensor loss = micro_batch_loss(job, step, slice);
      if (micro + 1 == c.microbatches) job.dp->arm();
      (loss.to_local() / static_cast<double>(c.microbatches)).backward();
      loss_sum += loss.to_local().item<double>();
    }
    job.dp->finish();
    job.pm->finish_grad_sync();
    const double grad_norm = clip_grad_norm(job.params, job.tp_mesh, c.grad_clip);
    job.optimizer->step(lr);
    // The step's loss: the mean over micro-batches and dp ranks.
    at::Tensor loss_value =
        at::full({1}, loss_sum / static_cast<double>(c.microbatches), at::kDouble);
    job.mesh.group("dp").all_reduce(loss_value, comm::ReduceOp::kAvg);
    const double loss = loss_value.item<double>();
    summary.losses.push_back(loss);

    if (c.checkpoint_interval > 0 && (step + 1) % c.checkpoint_interval == 0) {
      CheckpointMeta meta;
      meta.step = step + 1;
      meta.seed = c.seed;
      meta.optimizer_steps = job.optimizer->steps();
      meta.config = c.text;
      meta.plan = c.plan;
      meta.world_size = world.size();
      meta.mesh_shape = job.mesh.shape();
      meta.mesh_dims = job.mesh.dim_names();
      const auto t0 = Clock::now();
      const std::string folder =
          save_checkpoint(checkpoint_dir, parse_checkpoint_format(c.checkpoint_format),
                          job_state(job), tied_names(job), meta, world, c.checkpoint_keep);
      log_rank0("saved {} ({}) in {}", folder, c.checkpoint_format,
                format_duration(seconds_since(t0)));
    }
    const bool last = step + 1 == c.steps;
    const bool eval_now = last || (c.eval_interval > 0 && (step + 1) % c.eval_interval == 0);
    std::optional<double> val_loss;
    if (eval_now) val_loss = evaluate(job);
    if (last) summary.final_val_loss = *val_loss;
    if ((step + 1) % c.log_interval == 0 || last || val_loss) {
      StepMetrics m;
      m.step = step + 1;
      m.total_steps = c.steps;
      m.loss = loss;
      m.val_loss = val_loss;
      m.lr = lr;
      m.grad_norm = grad_norm;
      m.step_time_s = seconds_since(step_start);
      const double elapsed = seconds_since(start);
      const double done = static_cast<double>(step + 1 - start_step);
      m.tokens_per_s = tokens_per_step * done / elapsed;
      m.mfu = job.flops_per_sample * samples_per_step * done / elapsed /
              (peak * static_cast<double>(world.size()));
      m.mem_bytes = resident_bytes();
      for (const auto& [label, bytes] : stats.bytes_by_label()) {
        const int64_t before = bytes_before.count(label) ? bytes_before.at(label) : 0;
        if (label != "world") m.comm_bytes[label] = bytes - before;
      }
      m.eta_s = elapsed / done * static_cast<double>(c.steps - step - 1);
      log_rank0("{}", format_metrics_line(m));
      if (rank0) writer.write(m);
    }
  }
  summary.seconds = seconds_since(start);
  const int64_t ran = c.steps - start_step;
  if (ran > 1)
    summary.tokens_per_s =
        tokens_per_step * static_cast<double>(ran - 1) / seconds_since(timed_start);
  log_rank0("done: {} steps in {}, val_loss {:.4f} -> {:.4f}, {:.0f} tokens/s", ran,
            format_duration(summary.seconds), summary.first_val_loss, summary.final_val_loss,
            summary.tokens_per_s);
  return summary;
}

double run_evaluation(const JobConfig& config, const comm::Group& world,
                      const std::string& checkpoint) {
  Job job = build_job(config, world);
  load_state(job, CheckpointReader(checkpoint));
  const double val_loss = evaluate(job);
  log_rank0("val_loss {:.6f} over {} windows", val_loss, config.eval_windows);
  return val_loss;
}

}  // namespace vescale
