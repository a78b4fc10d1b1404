// One training step in four parts: schedule (forward/backward of every micro-batch) -> grad sync
// -> clip -> optimizer step; then the step's loss, the global-batch mean.
#pragma once

#include <vector>

#include "mesh/job_mesh.h"
#include "optim/optimizer.h"
#include "parallel/grad_clip.h"
#include "parallel/grad_sync.h"
#include "train/schedule.h"

namespace vescale {

struct StepResult {
  double loss = 0;       ///< mean over micro-batches and dp ranks: the global batch's mean loss
  double grad_norm = 0;  ///< before clipping
};

class TrainStep {
 public:
  /// `params` are the parameters `grad_sync` and `optimizer` cover, on the param mesh of `mesh`.
  /// Registers grad sync as a listener of the schedule's last backward.
  TrainStep(const JobMesh& mesh, std::vector<DTensor*> params, Schedule& schedule,
            GradSync& grad_sync, Optimizer& optimizer, double max_grad_norm);

  /// One step at learning rate `lr`; `forward` gives a micro-batch's loss. *Collective* over
  /// the job mesh.
  StepResult run(const MicroBatchLoss& forward, double lr);

 private:
  /// Each parameter's gradient with the job-mesh dims that split it.
  std::vector<GradPiece> grad_pieces() const;

  const JobMesh& mesh_;
  std::vector<DTensor*> params_;
  std::vector<std::vector<int>> split_dims_;  // per parameter, on the job mesh
  std::vector<int> norm_dims_;                // the dims any gradient may be split over
  Schedule& schedule_;
  GradSync& grad_sync_;
  Optimizer& optimizer_;
  double max_grad_norm_;
};

}  // namespace vescale
