// Job: everything one rank trains with, assembled from a job config — the job mesh, the task
// (model, data, loss), the parallelized model, grad sync, the optimizer, the schedule and the
// train step that ties them together.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "config/job_config.h"
#include "dmodule/parallelize.h"
#include "mesh/job_mesh.h"
#include "optim/optimizer.h"
#include "parallel/grad_sync.h"
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
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<Schedule> schedule;
  std::unique_ptr<TrainStep> train_step;

  Job(JobConfig c, JobMesh m) : config(std::move(c)), mesh(std::move(m)) {}

  /// The loss of micro-batch `micro` of step `step` on this rank (dp slice, micro-batch rows).
  DTensor micro_batch_loss(int64_t step, int64_t micro);
};

/// Builds the job of `config` on the ranks of `world` (its size must be the config's mesh
/// size): mesh, task, plan, deferred init of this rank's shards, grad sync, optimizer, schedule.
/// *Collective* over `world`.
std::unique_ptr<Job> build_job(const JobConfig& config, const comm::Group& world);

}  // namespace vescale
