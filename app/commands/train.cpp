// `vescale-train train CONFIG.toml [--section.key=value ...] [--nproc N]`.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "checkpoint/step_folders.h"
#include "comm/flight_diagnosis.h"
#include "commands/commands.h"
#include "commands/job_launch.h"
#include "commands/validators.h"
#include "config/job_config.h"
#include "config/memory_estimate.h"
#include "core/device.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/logging.h"
#include "core/memory_meter.h"
#include "dmodule/plan.h"
#include "hf/import.h"
#include "kernels/kernel_table.h"
#include "test_faults.h"
#include "train/checkpointing.h"
#include "train/lm_task.h"
#include "train/model_factory.h"
#include "train/preemption.h"
#include "train/preflight.h"
#include "train/trainer.h"

namespace vescale::app {
namespace {

struct TrainOptions {
  std::string config;
  int nproc = 0;
  int max_restarts = 0;
  bool elastic = false;
  int min_ranks = 1;
  bool print_config = false;
  std::string profile;
};

/// How the local launcher supervises a train job: time to save on a signal (comm.timeout_s, at
/// least a minute), the preempted exit code, and restarts from the newest committed checkpoint
/// of the job's dump folder (NOTE [Preemption]).
LocalLaunchOptions train_launch_options(const JobConfig& config, int max_restarts) {
  LocalLaunchOptions launch;
  launch.stop_grace =
      std::chrono::milliseconds(static_cast<int64_t>(std::max(60.0, config.timeout_s) * 1000));
  launch.preempted_exit_code = kPreemptedExitCode;
  launch.max_restarts = max_restarts;
  launch.final_exit_codes = {2, 3, kPreemptedExitCode};  // config error, diverged, preempted
  if (config.flight_recorder_entries > 0)
    launch.flight_folder = comm::flight_folder(config.dump_folder);
  const std::string latest = (checkpoints_folder(config.dump_folder) / "latest").string();
  launch.plan_restart = [latest] {
    try {
      const int64_t step = CheckpointReader(latest).meta().step;
      return std::pair<std::vector<std::string>, std::string>{{"--checkpoint.load=latest"},
                                                              fmt::format("from step {}", step)};
    } catch (const UserError&) {  // no committed checkpoint yet
      return std::pair<std::vector<std::string>, std::string>{{}, "from scratch"};
    }
  };
  return launch;
}

/// NOTE [Elastic training]: the local launcher drops a slot that fails more than its restarts
/// and restarts the job on the most slots left that form a valid mesh of the config (dp =
/// "auto"), at least `min_ranks`.
void make_elastic(LocalLaunchOptions& launch, const std::string& path,
                  const std::vector<std::string>& overrides, int min_ranks) {
  launch.elastic = true;
  launch.min_ranks = min_ranks;
  launch.world_for = [path, overrides](int slots) {
    for (int world = slots; world >= 1; --world) {
      try {
        JobConfig::load(path, overrides, world);
        return world;
      } catch (const UserError&) {  // no valid mesh on `world` ranks: one fewer
      }
    }
    return 0;
  };
}

/// The train command's flags, each checked as it is parsed.
void add_train_flags(CLI::App* train, TrainOptions* options) {
  train->add_option("config", options->config, "Job config (TOML)")->required();
  train
      ->add_option("--nproc", options->nproc,
                   "Processes (default: parallel.pp x dp x tp; must match it)")
      ->check(whole_in(1, 65536));
  train
      ->add_option("--max-restarts", options->max_restarts,
                   "Local launcher: when a worker crashes or is killed, restart all workers from "
                   "the newest committed checkpoint (checkpoint.load=latest), at most N times")
      ->check(whole_in(0, 1000000));
  train->add_flag("--elastic", options->elastic,
                  "Local launcher, elastic: a worker slot that fails more than --max-restarts "
                  "times is dropped and the job restarts from the newest committed checkpoint on "
                  "the slots left (needs parallel.dp = \"auto\"; the curve is the same)");
  train
      ->add_option("--min-ranks", options->min_ranks,
                   "With --elastic: stop, naming the slots lost, rather than go on with fewer "
                   "ranks than this")
      ->check(whole_in(1, 65536));
  train->add_option("--profile", options->profile,
                    "Write a Chrome trace of steps FIRST-LAST (e.g. 2-3, counted from 1 as the "
                    "metrics lines do) to <dump_folder>/trace.json: each rank's phases (forward, "
                    "backward, bubble, grad sync, optimizer, ...), its collectives and "
                    "transfers, and on a GPU the CUDA kernels, copies and memsets it ran; open it "
                    "in chrome://tracing or ui.perfetto.dev");
  train->add_flag(
      "--print-config", options->print_config,
      "Print the effective config (every key, with overrides applied, help as comments) and exit");
  train->allow_extras();
}

/// What the flags ask of the job, refused before any process starts; returns the steps to
/// profile.
StepRange check_train_flags(const TrainOptions& options, const CLI::App& train,
                            const JobConfig& config, bool launched) {
  // (A local worker of an elastic job may run on fewer ranks than --nproc.)
  VS_USER_CHECK(launched || options.nproc == 0 || options.nproc == config.world_size(),
                "--nproc {} does not match the mesh of {}: {} = {}", options.nproc, options.config,
                config.mesh_text(), config.world_size());
  VS_USER_CHECK(!options.elastic || config.dp_auto,
                "train --elastic: set parallel.dp = \"auto\" (config {} has parallel.dp = {}), "
                "so that dp follows the ranks left",
                options.config, config.dp);
  VS_USER_CHECK(options.elastic || train.count("--min-ranks") == 0,
                "train --min-ranks {}: it is the floor of an elastic job; add --elastic",
                options.min_ranks);
  VS_USER_CHECK(options.min_ranks <= config.world_size() || !options.elastic,
                "train --min-ranks {}: the job starts on {} ranks only", options.min_ranks,
                config.world_size());
  const StepRange profile =
      options.profile.empty() ? StepRange{} : StepRange::parse(options.profile, "--profile");
  VS_USER_CHECK(profile.empty() || profile.last <= config.steps,
                "--profile {}: the job runs training.steps = {} steps (config {})", options.profile,
                config.steps, options.config);
  if (!profile.empty()) {
    // Refused now, not at the profiled step after the run has trained up to it.
    const std::filesystem::path trace = std::filesystem::path(config.dump_folder) / "trace.json";
    std::error_code ec;
    VS_USER_CHECK(!std::filesystem::is_directory(std::filesystem::symlink_status(trace, ec)),
                  "--profile: {} is a folder; the trace is written there as a file (move it "
                  "away or set job.dump_folder)",
                  trace.string());
  }
  return profile;
}

/// What each rank of a train job runs; its exit code.
int train_rank(const TrainOptions& options, const JobConfig& config, const StepRange& profile,
               const LaunchEnv& env) {
  PreemptionHandler preemption;  // NOTE [Preemption]: from before the rendezvous on
  VS_USER_CHECK(
      options.max_restarts == 0 || env.source == "local" || env.source == "single process",
      "--max-restarts is for the local launcher; under {} use its own restarts "
      "(torchrun --max-restarts, Slurm --requeue) with --checkpoint.load=latest",
      env.source);
  VS_USER_CHECK(!options.elastic || env.source == "local" || env.source == "single process",
                "--elastic is the local launcher's; under {} use its own (torchrun --nnodes "
                "MIN:MAX) with parallel.dp = \"auto\" and --checkpoint.load=latest "
                "(docs/operations.md, Elastic)",
                env.source);
  install_memory_meter();  // for the activation bytes of the metrics
  const comm::Group world = connect_job(config, env);
  hang_at_collective_for_test(world);
  const TrainSummary summary = run_training(config, world, test_fault_hooks(), profile);
  // NOTE [GPU-verified]: what gpu-check reads to say which kernel rows a passing run took.
  log_rank0("[kernels] rank 0 took: {}", kernels::taken_rows());
  return summary.preempted ? kPreemptedExitCode : 0;
}

}  // namespace

void add_train_command(CLI::App& app, const Invocation& invocation) {
  auto options = std::make_shared<TrainOptions>();
  CLI::App* train = app.add_subcommand(
      "train",
      "Train the model a job config describes on its pp x dp x tp mesh (local workers by default; "
      "under "
      "torchrun, Slurm or Open MPI their processes). Any config key can be overridden as "
      "--section.key=value, e.g. --training.steps=20");
  add_train_flags(train, options.get());
  train->callback([options, train, &invocation] {
    // parallel.dp = "auto" divides the ranks a launcher started, else --nproc's.
    const std::optional<LaunchEnv> launched = detect_launch_env();
    const std::vector<std::string> overrides = collect_overrides(train->remaining());
    const JobConfig config =
        JobConfig::load(options->config, overrides, launched ? launched->world : options->nproc);
    if (options->print_config) {
      std::fwrite(config.annotated_text.data(), 1, config.annotated_text.size(), stdout);
      return;
    }
    const StepRange profile = check_train_flags(*options, *train, config, launched.has_value());
    if (config.dp_auto && !launched)
      log_rank0("parallel.dp = \"auto\": dp = {} on {} ranks ({})", config.dp, config.world_size(),
                config.mesh_text());
    precheck(config);
    LocalLaunchOptions launch = train_launch_options(config, options->max_restarts);
    if (options->elastic) make_elastic(launch, options->config, overrides, options->min_ranks);
    const int code = run_on_ranks(
        static_cast<int>(config.world_size()), mesh_of(config), invocation,
        [&](const LaunchEnv& env) { return train_rank(*options, config, profile, env); }, launch);
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

void add_eval_command(CLI::App& app, const Invocation& invocation) {
  auto options = std::make_shared<TrainOptions>();
  auto checkpoint = std::make_shared<std::string>();
  CLI::App* eval = app.add_subcommand(
      "eval",
      "Report the validation loss of a checkpoint under a job config's model, mesh and plan");
  eval->add_option("config", options->config, "Job config (TOML)")->required();
  eval->add_option("--checkpoint", *checkpoint,
                   "Step folder, checkpoints or dump folder (its newest step), merged .h5, "
                   "latest (the config's dump folder's newest step), or hf:DIR (a Hugging Face "
                   "model folder)")
      ->required();
  eval->allow_extras();
  eval->callback([options, checkpoint, eval, &invocation] {
    const JobConfig config =
        JobConfig::load(options->config, collect_overrides(eval->remaining()), launched_world());
    precheck(config);
    const std::string path = open_model_checkpoint(config, *checkpoint, "eval");
    const int code = run_on_ranks(static_cast<int>(config.world_size()), mesh_of(config),
                                  invocation, [&](const LaunchEnv& env) {
                                    const double val_loss =
                                        run_evaluation(config, connect_job(config, env), path);
                                    if (env.rank == 0) std::printf("val_loss %.17g\n", val_loss);
                                    return 0;
                                  });
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace vescale::app
