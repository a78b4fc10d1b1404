// `vescale-train train CONFIG.toml [--section.key=value ...] [--nproc N]`.
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "checkpoint/step_folders.h"
#include "commands/commands.h"
#include "config/job_config.h"
#include "config/memory_estimate.h"
#include "core/device.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/logging.h"
#include "core/memory_meter.h"
#include "core/torch_features.h"
#include "dmodule/plan.h"
#include "hf/import.h"
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
  bool print_config = false;
};

/// "the mesh of job.toml (parallel.pp x dp x tp = 1 x 2 x 2)", for run_on_ranks.
std::string mesh_of(const JobConfig& c) {
  return fmt::format("the mesh of {} ({})", c.source, c.mesh_text());
}

/// The preflight (train/preflight.h) as train runs it: a single process, or a worker under an
/// outside launcher, scans the data as it builds its task, so it is not scanned twice.
void precheck(const JobConfig& c) {
  const bool local = !detect_launch_env();
  preflight(c, PreflightOptions{local && c.world_size() > 1, local});
}

/// This rank's device (training.device for LOCAL_RANK), made current, with TF32 matmuls when it
/// computes float32 on CUDA (NOTE [Fast paths]).
Device bind_rank_device(const JobConfig& config, const LaunchEnv& env) {
  const Device device = parse_device(config.device, env.local_rank);
  bind_device(device);
  configure_matmul_precision(device, job_dtype(config));
  return device;
}

/// The world group of a job: its timeout, backend and the device its tensors live on.
comm::GroupOptions world_options(const JobConfig& config, Device device) {
  comm::GroupOptions group;
  group.timeout = std::chrono::milliseconds(static_cast<int64_t>(config.timeout_s * 1000));
  group.backend = comm::parse_backend(config.backend);
  group.device = device;
  return group;
}

/// Binds this rank's device and connects the job's world group; rank 0 says which device,
/// backend and fast paths the job uses.
comm::Group connect_job(const JobConfig& config, const LaunchEnv& env) {
  const Device device = bind_rank_device(config, env);
  comm::Group world = connect_world(env, world_options(config, device));
  log_rank0("[device] rank 0 computes on {} (training.device = {}), comm backend {}; {}",
            device.str(), config.device, comm::backend_name(world.backend()),
            fast_paths_summary(device, job_dtype(config)));
  return world;
}

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

}  // namespace

void add_train_command(CLI::App& app, const Invocation& invocation) {
  auto options = std::make_shared<TrainOptions>();
  CLI::App* train = app.add_subcommand(
      "train",
      "Train the model a job config describes on its pp x dp x tp mesh (local workers by default; "
      "under "
      "torchrun, Slurm or Open MPI their processes). Any config key can be overridden as "
      "--section.key=value, e.g. --training.steps=20");
  train->add_option("config", options->config, "Job config (TOML)")->required();
  train->add_option("--nproc", options->nproc,
                    "Processes (default: parallel.pp x dp x tp; must match it)");
  train->add_option("--max-restarts", options->max_restarts,
                    "Local launcher: when a worker crashes or is killed, restart all workers from "
                    "the newest committed checkpoint (checkpoint.load=latest), at most N times");
  train->add_flag(
      "--print-config", options->print_config,
      "Print the effective config (every key, with overrides applied, help as comments) and exit");
  train->allow_extras();
  train->callback([options, train, &invocation] {
    const JobConfig config =
        JobConfig::load(options->config, collect_overrides(train->remaining()));
    if (options->print_config) {
      std::fwrite(config.annotated_text.data(), 1, config.annotated_text.size(), stdout);
      return;
    }
    VS_USER_CHECK(options->nproc == 0 || options->nproc == config.world_size(),
                  "--nproc {} does not match the mesh of {}: {} = {}", options->nproc,
                  options->config, config.mesh_text(), config.world_size());
    precheck(config);
    const auto body = [&](const LaunchEnv& env) {
      PreemptionHandler preemption;  // NOTE [Preemption]: from before the rendezvous on
      VS_USER_CHECK(
          options->max_restarts == 0 || env.source == "local" || env.source == "single process",
          "--max-restarts is for the local launcher; under {} use its own restarts "
          "(torchrun --max-restarts, Slurm --requeue) with --checkpoint.load=latest",
          env.source);
      install_memory_meter();  // for the activation bytes of the metrics
      const TrainSummary summary =
          run_training(config, connect_job(config, env), test_fault_hooks());
      return summary.preempted ? kPreemptedExitCode : 0;
    };
    const int code =
        run_on_ranks(static_cast<int>(config.world_size()), mesh_of(config), invocation, body,
                     train_launch_options(config, options->max_restarts));
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
    const JobConfig config = JobConfig::load(options->config, collect_overrides(eval->remaining()));
    precheck(config);
    // "latest": the job's own newest committed step. The checkpoint is opened once here, so
    // that a wrong path is one error line before any process starts.
    std::string path = *checkpoint;
    if (path == "latest") {
      const std::optional<std::string> newest = newest_checkpoint(config.dump_folder);
      VS_USER_CHECK(newest.has_value(),
                    "eval --checkpoint=latest: {} holds no committed checkpoint (job.dump_folder "
                    "of {})",
                    checkpoints_folder(config.dump_folder).string(), config.source);
      path = *newest;
    }
    if (hf::is_hf_path(path)) {
      hf::HFWeights{path, config};  // config.json and the tensors' shapes checked
    } else {
      CheckpointReader{path};
    }
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
