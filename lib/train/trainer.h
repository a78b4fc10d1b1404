// The training loop: builds the job (train/job.h), resumes from a checkpoint, and runs train
// steps (train/train_step.h) with evaluation, checkpoints and metrics.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "comm/group.h"
#include "config/job_config.h"
#include "train/profile_trace.h"

namespace vescale {

struct TrainSummary {
  std::vector<double> losses;  ///< every step's loss (global batch mean)
  /// A mixture of experts: the auxiliary loss of each step the metrics logged (NOTE [MoE
  /// auxiliary loss]).
  std::vector<double> aux_losses;
  double first_val_loss = 0;  ///< before the first step
  double final_val_loss = 0;  ///< after the last
  /// Over all steps after the first, evaluation's time excluded (it trains nothing).
  double tokens_per_s = 0;
  double seconds = 0;
  double timed_eval_s = 0;  ///< evaluation inside the steps tokens_per_s covers
  /// Stopped on a signal after this many steps, with a checkpoint of them (NOTE [Preemption]).
  bool preempted = false;
  double stop_check_s = 0;  ///< waiting for the per-step stop agreements, in all
};

/// What the caller runs inside the loop (the app's fault injection for its end-to-end tests).
struct TrainHooks {
  /// Called on every rank as it is about to run 0-based step `step`.
  std::function<void(int rank, int64_t step)> before_step;
};

/// Trains as `config` says on the ranks of `world` (its size must be the config's mesh size).
/// Stops early, saved, when a PreemptionHandler saw a signal (NOTE [Preemption]).
/// *Collective* over `world`.
/// `profile`: the steps whose Chrome trace goes to <dump_folder>/trace.json (NOTE [Profile
/// trace]; empty: none).
TrainSummary run_training(const JobConfig& config, const comm::Group& world,
                          const TrainHooks& hooks = {}, const StepRange& profile = {});

/// The validation loss of the model in `checkpoint` under `config`'s model, mesh and plan.
/// *Collective* over `world`.
double run_evaluation(const JobConfig& config, const comm::Group& world,
                      const std::string& checkpoint);

}  // namespace vescale
