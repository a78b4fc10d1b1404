// Job: everything one rank trains with, assembled from a job config — the job mesh, the task
// (model, data, loss), the parallelized model, grad sync, the optimizer, the schedule and the
// train step that ties them together.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "config/job_config.h"
#include "dmodule/parallelize.h"
#include "mesh/job_mesh.h"
#include "optim/master_weights.h"
#include "optim/optimizer.h"
#include "parallel/grad_sync.h"
#include "parallel/pipeline/schedule.h"
#include "parallel/pipeline/stage_split.h"
#include "parallel/zero/zero.h"
#include "train/metrics.h"
#include "train/pipeline_runner.h"
#include "train/schedule.h"
#include "train/task.h"
#include "train/train_step.h"

namespace vescale {

struct Job {
  JobConfig config;
  JobMesh mesh;
  std::unique_ptr<Task> task;
  std::unique_ptr<ParallelizedModule> model;
  std::vector<std::pair<std::string, DTensor*>> params;  ///< each once, by FQN
  int64_t n_params = 0;                                  ///< global elements
  std::unique_ptr<GradSync> grad_sync;
  std::unique_ptr<Zero> zero;             ///< ZeRO over dp (parallel.zero >= 1)
  std::unique_ptr<MasterWeights> master;  ///< float32 copies of bf16 parameters (mixed precision)
  std::unique_ptr<Optimizer> optimizer;   ///< null in an evaluation job
  std::unique_ptr<GradientAccumulation> accumulation;  ///< the schedule without a pipeline
  std::unique_ptr<PipelineRunner> pipeline;            ///< the schedule with one (pp > 1)
  std::unique_ptr<TrainStep> train_step;               ///< null in an evaluation job
  /// Parameters this rank holds but does not save: copies of a weight tied across pipeline
  /// stages whose first stage is on another rank (that rank saves it).
  std::set<std::string> not_saved;
  /// The run's id in every checkpoint: a loaded checkpoint's, else drawn by JobCheckpointer
  /// (NOTE [Checkpoint integrity]).
  std::string run_id;

  Job(JobConfig c, JobMesh m) : config(std::move(c)), mesh(std::move(m)) {}

  /// Micro-batch `micro` of step `step` on this rank (its dp slice, the micro-batch's rows).
  Batch micro_batch(int64_t step, int64_t micro);
  /// This rank's training state by kind, from tensor sizes: "params", "grads", "optimizer".
  StateBytes state_bytes() const;
  /// The schedule of the steps: the pipeline, or gradient accumulation without one.
  Schedule& schedule();
  /// Runs the task's layers (under ZeRO-3, gathering each layer's parameters around it).
  LayerRunner layer_runner();
  /// After the optimizer updated its views (or a checkpoint was loaded into them): master
  /// weights rounded into the parameters, ZeRO's rows all-gathered. *Collective* over dp.
  void after_update();
  /// The mean loss of `batch` without gradients (under a pipeline: on the last stage's rank,
  /// 0 on the others). *Collective* over the parameter mesh (and the pp group).
  double forward_loss(const Batch& batch);
};

/// The pipeline's cut of a task's layers: the schedule, and per stage its layers and modules.
struct PipelinePlan {
  pipeline::PipelineSchedule schedule;
  std::vector<pipeline::Stage> stages;
  std::vector<std::vector<std::string>> modules;  ///< per stage
};

/// `config`'s schedule (parallel.pp_schedule, pp_virtual, microbatches) and its split of
/// `layers` (parallel.pp_split). Throws UserError saying what would work.
PipelinePlan plan_pipeline(const JobConfig& config, const std::vector<Layer>& layers);

/// What a job is built for.
enum class JobPurpose {
  kTrain,     ///< the model and everything a step needs: optimizer, master weights, train step
  kEvaluate,  ///< the model on its mesh and its forward only: no optimizer or master weights
};

/// Builds the job of `config` on the ranks of `world` (its size must be the config's mesh
/// size): mesh, task, plan, deferred init of this rank's shards, grad sync, schedule and, to
/// train, the optimizer and train step. *Collective* over `world`.
std::unique_ptr<Job> build_job(const JobConfig& config, const comm::Group& world,
                               JobPurpose purpose = JobPurpose::kTrain);

}  // namespace vescale
