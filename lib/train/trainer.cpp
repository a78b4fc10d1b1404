#include "train/trainer.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>
#include <utility>

#include <ATen/ATen.h>
#include <c10/util/accumulate.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "checkpoint/step_folders.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/gpu_memory.h"
#include "core/logging.h"
#include "core/memory_meter.h"
#include "core/units.h"
#include "hf/import.h"
#include "optim/lr_schedule.h"
#include "train/checkpointing.h"
#include "train/evaluator.h"
#include "train/job.h"
#include "train/metrics.h"
#include "train/model_factory.h"
#include "train/muon_params.h"
#include "train/nonfinite.h"
#include "train/peak_flops.h"
#include "train/preemption.h"
#include "train/run_folder.h"
#include "train/tensorboard.h"

namespace vescale {
namespace {

/// The per-rank peak of the MFU (NOTE [MFU peak]), said once: gpu-check reads it. On the CPU
/// rank 0 measures a core while the others wait in the broadcast.
PeakFlops mfu_peak(const Job& job, const comm::Group& world) {
  const auto core_on_rank0 = [&world](at::ScalarType dtype) {
    at::Tensor rate = at::zeros({1}, at::kDouble);
    if (world.rank() == 0) rate.fill_(measured_core_flops(dtype));
    world.broadcast(rate, 0);
    return rate.item<double>();
  };
  const PeakFlops peak = job_peak_flops(job.config().peak_flops, job.model->mesh().mesh().device(),
                                        job_dtype(job.config()), core_on_rank0);
  log_rank0("[mfu] peak {:.4g} TFLOP/s per rank: {}", peak.flops / 1e12, peak.source);
  return peak;
}

/// The optimizer's FLOPs a step that MFU counts beside the model's `model_flops`: Muon's
/// Newton-Schulz, said once.
double optimizer_flops(const Job& job, double model_flops) {
  const double flops = muon_flops_per_step(job.config());
  if (flops > 0)
    log_rank0(
        "[mfu] Muon's Newton-Schulz: {:.4g} GFLOP a step, {:.2f}% of the model's {:.4g}, "
        "counted in mfu",
        flops / 1e9, 100.0 * flops / model_flops, model_flops / 1e9);
  return flops;
}

/// The model's training FLOPs per sample: its layers' (6 per parameter and token, and
/// attention's), less 2 per frozen matmul parameter and token under LoRA (NOTE [LoRA]), whose
/// weight gradients are never computed; an expert's parameter counts top-k / E of a token, as
/// in the layers' count. Said once in the log.
double training_flops_per_sample(const Job& job) {
  const Task& task = job.model->task();
  const double all = task.flops_per_sample();
  if (job.config().lora_rank == 0) return all;
  const std::optional<TransformerShape> shape =
      job.config().family().transformer_shape(job.config().model_spec());
  const double top_k = shape ? static_cast<double>(shape->experts_per_token) : 0.0;
  double frozen = 0;
  for (const Layer& layer : task.layers()) {
    if (layer.kind == LayerKind::kEmbedding) continue;  // a lookup: counted as no matmul
    std::set<const Parameter*> seen;
    for (const auto& [fqn, p] : task.model()->all_parameter_names()) {
      if (p->trainable || !under_modules(fqn, layer.modules) || !seen.insert(p.get()).second)
        continue;
      const double share = p->expert ? top_k / static_cast<double>(p->expert->count) : 1.0;
      frozen += share * static_cast<double>(c10::multiply_integers(p->shape));
    }
  }
  const double saved = 2.0 * frozen * task.tokens_per_sample();
  log_rank0(
      "[mfu] LoRA: {:.4g} GFLOP a sample, not {:.4g}: the frozen weights' gradients are not "
      "computed",
      (all - saved) / 1e9, all / 1e9);
  return all - saved;
}

/// What the loop needs to turn steps into metrics lines.
struct Meter {
  Meter(const Job& job, const comm::Group& world)
      : stats(world.stats()),
        world_size(static_cast<double>(world.size())),
        samples_per_step(static_cast<double>(job.config().global_batch_size)),
        tokens_per_step(samples_per_step * job.model->task().tokens_per_sample()),
        flops_per_sample(training_flops_per_sample(job)),
        optimizer_flops_per_step(optimizer_flops(job, flops_per_sample * samples_per_step)),
        peak(mfu_peak(job, world)) {}

  comm::CommStats& stats;
  double world_size, samples_per_step, tokens_per_step, flops_per_sample;
  double optimizer_flops_per_step;  ///< Muon's Newton-Schulz (NOTE [Muon exchange])
  PeakFlops peak;  ///< raised where a rate passes a peak measured on the cores (NOTE [MFU peak])
  bool peak_raised = false;
  Clock::time_point start = Clock::now();
};

// NOTE [Activation bytes]
// A step's activations on this rank are the live bytes of its device (the CPU's memory meter,
// core/memory_meter.h, or the GPU's caching allocator, core/gpu_memory.h) just before its last
// backward starts, less those just before its first forward (after zero_grad freed the last
// step's gradients), less the gradients that earlier micro-batches accumulated by then: what the
// forward passes keep for backward, and the micro-batches themselves. Under a pipeline that is
// what the rank's schedule stashes at that point. The first step also counts what grad sync
// allocates once at its first last backward (its buckets), since its listener runs first.
class ActivationMeter {
 public:
  explicit ActivationMeter(Job& job) : job_(job), device_(job.model->mesh().mesh().device()) {
    job.schedule().on_last_backward([this] { before_last_backward(); });
  }

  /// Starts a step: its first before_forward() is the baseline.
  void start_step() { baseline_.reset(); }
  /// Call as each micro-batch's forward is about to start.
  void before_forward() {
    if (!baseline_) baseline_ = live_bytes();
  }
  /// `state` and the last step's activations, where they are measured.
  StateBytes with_activations(StateBytes state) const {
    if (measured()) state.emplace_back("activations", bytes_);
    return state;
  }

 private:
  bool measured() const { return device_.is_cuda() || memory_meter_installed(); }
  int64_t live_bytes() const {
    if (device_.is_cuda()) return gpu_memory(device_).allocated;
    return metered_live_bytes();
  }
  void before_last_backward() {
    const int64_t grads = job_.grad_sync->grad_bytes();
    bytes_ = live_bytes() - baseline_.value_or(0) - grads;
  }

  Job& job_;
  const Device device_;
  std::optional<int64_t> baseline_;
  int64_t bytes_ = 0;
};

StepMetrics step_metrics(Meter& meter, int64_t step, int64_t start_step, int64_t total,
                         const StepResult& result, double lr, std::optional<double> val_loss,
                         Clock::time_point step_start, const comm::CommSnapshot& comm_before,
                         const comm::CommSnapshot& comm_after, StateBytes state_bytes,
                         Device device) {
  StepMetrics m;
  m.step = step + 1;
  m.total_steps = total;
  m.loss = result.loss;
  m.val_loss = val_loss;
  m.lr = lr;
  m.grad_norm = result.grad_norm;
  m.step_time_s = seconds_since(step_start);
  const double elapsed = seconds_since(meter.start);
  const double done = static_cast<double>(step + 1 - start_step);
  m.tokens_per_s = meter.tokens_per_step * done / elapsed;
  const double rank_rate =
      (meter.flops_per_sample * meter.samples_per_step + meter.optimizer_flops_per_step) * done /
      elapsed / meter.world_size;
  const MfuReading mfu = read_mfu(rank_rate, meter.peak.flops, meter.peak.on_cores);
  if (mfu.raised && !meter.peak_raised && log_rank() == 0)
    spdlog::warn(
        "[mfu] step {} ran at {:.0f}% of the peak measured at the start ({:.4g} GFLOP/s "
        "a rank: measured while other processes used the cores?); the peak is now the "
        "rate the run reached, {:.4g} GFLOP/s a rank. Set metrics.peak_flops for a fixed "
        "figure",
        step + 1, 100 * rank_rate / meter.peak.flops, meter.peak.flops / 1e9, mfu.peak / 1e9);
  meter.peak_raised = meter.peak_raised || mfu.raised;
  meter.peak.flops = mfu.peak;
  m.mfu = mfu.mfu;
  m.mem_bytes = resident_bytes();
  if (device.is_cuda()) m.gpu_mem = gpu_memory(device);
  m.state_bytes = std::move(state_bytes);
  set_comm_bytes(m, comm_before, comm_after);
  m.eta_s = elapsed / done * static_cast<double>(total - step - 1);
  return m;
}

/// Every pipeline rank's measured bubble and stash (each rank prints its own line).
void log_pipeline_stats(const ParallelModel& model) {
  const PipelineRunner::Stats& s = model.pipeline()->stats();
  std::vector<std::string> stash;
  for (const auto& [stage, peak] : s.peak_in_flight)
    stash.push_back(fmt::format("stage {}: {}", stage, peak));
  spdlog::info(
      "pipeline pp rank {}: bubble {:.1f}% ({} waiting of {} over {} steps); peak micro-batches "
      "in flight {}; peak resident memory {}",
      model.mesh().pp_rank(), 100.0 * s.idle_s / std::max(s.step_s, 1e-12),
      format_duration(s.idle_s), format_duration(s.step_s), s.steps, fmt::join(stash, ", "),
      format_bytes(static_cast<double>(peak_resident_bytes())));
}

/// The training loop between its steps: the job, what each step reports to, and what the run
/// has measured so far.
class TrainingLoop {
 public:
  TrainingLoop(Job& job, const comm::Group& world, bool resumed, int64_t start_step,
               TrainHooks hooks, const StepRange& profile)
      : job_(job),
        c_(job.config()),
        world_(world),
        start_step_(start_step),
        hooks_(std::move(hooks)),
        folder_(job, world, resumed, start_step),
        writer_(folder_.metrics_path(), job.run_id),
        tensorboard_(c_.tensorboard && !folder_.metrics_path().empty()
                         ? std::filesystem::path(folder_.metrics_path()).parent_path().string()
                         : ""),
        meter_(job, world),
        device_(job.model->mesh().mesh().device()),
        activations_(job),
        checkpointer_(job, world),
        nonfinite_(c_.on_nonfinite, c_.max_skipped),
        profiler_(profile, *job.trace, world,
                  (std::filesystem::path(c_.dump_folder) / "trace.json").string(), device_) {
    summary_.first_val_loss = evaluate(*job_.model);
    log_rank0("step {}/{} | val_loss {:.4f}", start_step_, c_.steps, summary_.first_val_loss);
    // The first line's GPU peaks are those of its steps, not of building the model.
    if (device_.is_cuda()) reset_gpu_memory_peaks(device_);
    meter_.start = Clock::now();
  }

  /// Runs step `step` (0-based) with its evaluation, metrics line and checkpoint. Returns true
  /// when the ranks agreed to stop after it (NOTE [Preemption]); it is saved then.
  bool run_step(int64_t step) {
    if (hooks_.before_step) hooks_.before_step(world_.rank(), step);
    comm::FlightRecorder& flight = job_.trace->flight();
    flight.set_step(step + 1);  // as the metrics lines number steps
    profiler_.start_step(step + 1);
    const auto step_start = Clock::now();
    if (step == start_step_ + 1) timed_start_ = step_start;
    const bool last = step + 1 == c_.steps;
    // NOTE [Preemption]: the ranks agree whether to stop while the step computes (started before
    // the step's byte count, which it is not part of). The last step is not interrupted.
    std::optional<StopAgreement> stop_agreement;
    if (!last) stop_agreement.emplace(world_);
    const comm::CommSnapshot comm_before = meter_.stats.snapshot();
    const comm::WaitSnapshot waits_before = meter_.stats.wait_snapshot();
    const double lr = lr_at(step, c_.steps, c_.lr, c_.warmup_steps, c_.decay == LrDecay::kCosine,
                            c_.min_lr_ratio);
    activations_.start_step();
    const StepResult result = job_.train_step->run(
        [&](int64_t micro) {
          activations_.before_forward();
          return job_.model->micro_batch(step, micro);
        },
        lr);
    // The step's bytes only: not those of the checkpoint or evaluation that may follow.
    const comm::CommSnapshot comm_after = meter_.stats.snapshot();
    const comm::WaitSnapshot waits_after = meter_.stats.wait_snapshot();
    summary_.losses.push_back(result.loss);
    nonfinite_.after_step(step, result);
    const auto check_start = Clock::now();
    const bool stop = [&] {
      const StepPhase phase(job_.trace.get(), "stop agreement");
      return stop_agreement && stop_agreement->wait();
    }();
    summary_.stop_check_s += seconds_since(check_start);

    const std::optional<double> val_loss = evaluate_after(step, last, stop);
    if ((step + 1) % c_.log_interval == 0 || last || val_loss || stop) {
      const StepPhase phase(job_.trace.get(), "metrics");
      StepMetrics m = step_metrics(meter_, step, start_step_, c_.steps, result, lr, val_loss,
                                   step_start, comm_before, comm_after,
                                   activations_.with_activations(job_.state_bytes()), device_);
      m.time = result.time;
      if (const std::optional<RouterFigures> router = job_.model->router_figures(step)) {
        m.aux_loss = router->aux_loss;
        summary_.aux_losses.push_back(router->aux_loss);
        m.expert_load_max_over_mean = router->load_max_over_mean;
      }
      set_comm_waits(m, waits_before, waits_after);
      m.checkpoint_stall_s = std::exchange(checkpoint_stall_s_, 0.0);
      log_rank0("{}", format_metrics_line(m));
      if (world_.rank() == 0) {
        writer_.write(m);
        tensorboard_.write(m);
      }
      // The next line's GPU peaks are those of its own steps.
      if (device_.is_cuda()) reset_gpu_memory_peaks(device_);
    }
    // After the step's metrics line: a crash between the two loses no line (the resumed run drops
    // it with the others after its checkpoint and writes it again, NOTE [One run per dump
    // folder]; evaluation reads the state, so the saved state is the same).
    // With checkpoint.interval > 0 the last step is saved too, whatever the interval.
    if (stop ||
        (c_.checkpoint_interval > 0 && ((step + 1) % c_.checkpoint_interval == 0 || last))) {
      const StepPhase phase(job_.trace.get(), "checkpoint");
      const auto save_start = Clock::now();
      checkpointer_.save(step + 1);
      checkpoint_stall_s_ += seconds_since(save_start);
    }
    profiler_.end_step(step + 1);
    if (c_.flight_recorder_dump == step + 1) dump_flight(flight, step + 1);
    return stop;
  }

  /// After the last step run (`end_step`: the step count then): commits the last checkpoint
  /// before training reports it is done, and logs the run's figures.
  TrainSummary finish(int64_t end_step) {
    profiler_.finish();
    checkpointer_.finish();
    summary_.preempted = end_step < c_.steps;
    summary_.seconds = seconds_since(meter_.start);
    const int64_t ran = end_step - start_step_;
    if (ran > 1)
      summary_.tokens_per_s = meter_.tokens_per_step * static_cast<double>(ran - 1) /
                              (seconds_since(timed_start_) - summary_.timed_eval_s);
    log_stop_agreements(end_step, ran);
    if (summary_.preempted) {
      log_preempted(end_step);
    } else {
      log_done(ran);
    }
    return summary_;
  }

 private:
  /// The validation loss after step `step` when it is due (the last step, or every
  /// eval.interval steps unless the run stops): timed, for tokens/s to leave it out.
  std::optional<double> evaluate_after(int64_t step, bool last, bool stop) {
    const bool due = c_.eval_interval > 0 && (step + 1) % c_.eval_interval == 0;
    if (!last && (stop || !due)) return std::nullopt;
    const StepPhase phase(job_.trace.get(), "evaluate");
    const auto eval_start = Clock::now();
    const double val_loss = evaluate(*job_.model);
    if (step > start_step_) summary_.timed_eval_s += seconds_since(eval_start);
    if (last) summary_.final_val_loss = val_loss;
    return val_loss;
  }

  /// comm.flight_recorder_dump: every rank's recorder as it is after `step`.
  void dump_flight(const comm::FlightRecorder& flight, int64_t step) const {
    const std::string reason =
        fmt::format("comm.flight_recorder_dump = {}: the dump after step {}", step, step);
    const bool written = flight.dump(reason);
    VS_CHECK(written || flight.dump_file().empty(), "[flight] rank {} could not write {}",
             world_.rank(), flight.dump_file());
    log_rank0(
        "[flight] every rank dumped its flight recorder after step {} to {}/flight "
        "(vescale-train diagnose {})",
        step, c_.dump_folder, c_.dump_folder);
  }

  void log_stop_agreements(int64_t end_step, int64_t ran) const {
    // Every step but the last starts an agreement.
    const int64_t agreements = end_step < c_.steps ? ran : ran - 1;
    log_rank0(
        "[preempt] stop agreement: {} all-reduce{} of one flag, each in flight during its step; "
        "waited {:.1f} us per step for them ({:.3f}% of the step time)",
        agreements, agreements == 1 ? "" : "s",
        1e6 * summary_.stop_check_s / static_cast<double>(ran),
        100.0 * summary_.stop_check_s / std::max(summary_.seconds, 1e-12));
  }

  void log_preempted(int64_t end_step) const {
    const int sig = preemption_signal();
    log_rank0(
        "preempted by {}: stopped after step {} of {}, its checkpoint is committed in "
        "{}/checkpoints; resume with --checkpoint.load=latest (exit code {})",
        sig != 0 ? fmt::format("signal {} ({})", sig, strsignal(sig))
                 : std::string("a signal to another rank"),
        end_step, c_.steps, c_.dump_folder, kPreemptedExitCode);
  }

  void log_done(int64_t ran) const {
    log_rank0("done: {} steps in {}, val_loss {:.4f} -> {:.4f}, {:.0f} tokens/s, peak RSS {}", ran,
              format_duration(summary_.seconds), summary_.first_val_loss, summary_.final_val_loss,
              summary_.tokens_per_s, format_bytes(static_cast<double>(peak_resident_bytes())));
    if (nonfinite_.skipped() > 0)
      log_rank0("{} step{} skipped: the loss or gradient norm was not finite", nonfinite_.skipped(),
                nonfinite_.skipped() == 1 ? "" : "s");
    if (job_.model->pipeline()) log_pipeline_stats(*job_.model);
  }

  Job& job_;
  const JobConfig& c_;
  const comm::Group& world_;
  const int64_t start_step_;
  const TrainHooks hooks_;
  const RunFolder folder_;
  MetricsWriter writer_;
  TensorBoardWriter tensorboard_;  ///< metrics.tensorboard (rank 0)
  Meter meter_;
  const Device device_;  ///< where this rank computes
  ActivationMeter activations_;
  JobCheckpointer checkpointer_;
  NonFiniteGuard nonfinite_;
  Profiler profiler_;              ///< train --profile
  double checkpoint_stall_s_ = 0;  ///< saves since the last metrics line
  TrainSummary summary_;
  Clock::time_point timed_start_;
};

/// Where a run starts: the step, and whether it resumes a run (its checkpoints and metrics).
struct Start {
  int64_t step = 0;
  bool resumed = false;
};

/// A LoRA job (NOTE [LoRA]): resumes a LoRA checkpoint (its base, checked, then its adapters
/// and their optimizer state), or starts a new run on a base.
Start start_lora(Job& job, const std::optional<std::string>& load_path) {
  const JobConfig& c = job.config();
  VS_USER_CHECK(load_path.has_value(),
                "config {}: lora.rank = {} adapts a base, and checkpoint.load = \"latest\" finds "
                "no committed step in {}: the first run names its base (a checkpoint or "
                "\"hf:DIR\")",
                c.source, c.lora_rank, checkpoints_folder(c.dump_folder).string());
  if (const std::optional<LoraBase> recorded = recorded_lora_base(*load_path)) {
    check_lora_base(*recorded, *load_path);
    job.lora_base = *recorded;
    load_lora_base(*job.model, job.lora_base);
    const int64_t step = load_job(job, CheckpointReader(*load_path));
    VS_USER_CHECK(step < c.steps,
                  "config {}: the checkpoint is at step {}, not before training.steps = {}",
                  c.source, step, c.steps);
    return {step, true};
  }
  job.lora_base = lora_base_of(*load_path);
  load_lora_base(*job.model, job.lora_base);
  if (!c.lora_adapter.empty()) load_peft_adapter(*job.model, c.lora_adapter);
  job.after_update();
  log_rank0("[lora] a new run on the base at step 0: adapters {}, optimizer fresh",
            c.lora_adapter.empty() ? "as initialised (B = 0)" : "from " + c.lora_adapter);
  return {0, false};
}

/// Loads the checkpoint the config names, if any: the step the run goes on from.
Start resume(Job& job, const std::optional<std::string>& load_path) {
  const JobConfig& c = job.config();
  if (c.lora_rank > 0) return start_lora(job, load_path);
  if (load_path && hf::is_hf_path(*load_path)) {
    // Weights only: a new run from them, its optimizer fresh.
    load_model_from_hf(*job.model, *load_path);
    job.after_update();
    log_rank0("starting from the Hugging Face weights at step 0; the optimizer starts fresh");
    return {0, false};
  }
  const int64_t start_step = load_path ? load_job(job, CheckpointReader(*load_path)) : 0;
  VS_USER_CHECK(start_step < c.steps,
                "config {}: the checkpoint is at step {}, not before training.steps = {}", c.source,
                start_step, c.steps);
  return {start_step, load_path.has_value()};
}

}  // namespace

TrainSummary run_training(const JobConfig& c, const comm::Group& world, const TrainHooks& hooks,
                          const StepRange& profile) {
  std::unique_ptr<Job> job = build_job(c, world);
  const std::optional<std::string> load_path = resolve_load_path(c);
  const auto [start_step, resumed] = resume(*job, load_path);  // hf: or a LoRA base: a new run
  TrainingLoop loop(*job, world, resumed, start_step, hooks, profile);
  for (int64_t step = start_step; step < c.steps; ++step) {
    if (loop.run_step(step)) return loop.finish(step + 1);
  }
  return loop.finish(c.steps);
}

double run_evaluation(const JobConfig& config, const comm::Group& world,
                      const std::string& checkpoint) {
  ParallelModel model(config, world, JobPurpose::kEvaluate);
  log_rank0("{}; evaluation only (no optimizer)", model.description());
  load_model(model, checkpoint);
  const double val_loss = evaluate(model);
  log_rank0("val_loss {:.6f} over {} windows", val_loss, config.eval_windows);
  return val_loss;
}

}  // namespace vescale
