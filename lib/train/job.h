// Job: a training job built on a ParallelModel (train/parallel_model.h): grad sync, ZeRO over dp,
// master weights for mixed precision, the optimizer, the schedule of a step's micro-batches and
// the train step that ties them together.
#pragma once

#include <memory>
#include <string>

#include "config/job_config.h"
#include "hf/lora_base.h"
#include "optim/master_weights.h"
#include "optim/optimizer.h"
#include "parallel/grad_sync.h"
#include "parallel/zero/zero.h"
#include "train/metrics.h"
#include "train/parallel_model.h"
#include "train/schedule.h"
#include "train/step_trace.h"
#include "train/train_step.h"

namespace vescale {

struct Job {
  std::unique_ptr<ParallelModel> model;
  std::unique_ptr<GradSync> grad_sync;
  std::unique_ptr<Zero> zero;             ///< ZeRO over dp (parallel.zero >= 1)
  std::unique_ptr<MasterWeights> master;  ///< float32 copies of bf16 parameters (mixed precision)
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<GradientAccumulation> accumulation;  ///< the schedule without a pipeline
  std::unique_ptr<TrainStep> train_step;
  /// The step's phases for the flight recorder and the profile (NOTE [Profile trace]).
  std::unique_ptr<StepTrace> trace;
  /// The run's id in every checkpoint: a loaded checkpoint's, else drawn by JobCheckpointer
  /// (NOTE [Checkpoint integrity]).
  std::string run_id;
  /// A LoRA job's base (NOTE [LoRA]), named in its checkpoints; empty otherwise.
  LoraBase lora_base;

  const JobConfig& config() const { return model->config(); }
  /// This rank's training state by kind, from tensor sizes: "params", "grads", "optimizer".
  StateBytes state_bytes() const;
  /// The schedule of the steps: the pipeline, or gradient accumulation without one.
  Schedule& schedule();
  /// After the optimizer updated its views (or a checkpoint was loaded into them): master
  /// weights rounded into the parameters, ZeRO's rows all-gathered. *Collective* over dp.
  void after_update();
};

/// Builds the training job of `config` on the ranks of `world` (its size must be the config's
/// mesh size): the parallel model, grad sync, ZeRO, the optimizer, the schedule and the train
/// step. *Collective* over `world`.
std::unique_ptr<Job> build_job(const JobConfig& config, const comm::Group& world);

}  // namespace vescale
