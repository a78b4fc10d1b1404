// Evaluation: the validation loss, with the batches spread over dp ranks.
#pragma once

#include "mesh/job_mesh.h"
#include "train/task.h"

namespace vescale {

/// The mean loss over the task's first `limit` validation batches (GPT: windows of the val
/// split, mean token cross entropy; MLP: validation batches); batch w runs on dp rank w mod dp.
/// *Collective* over the job mesh.
double evaluate(Task& task, const JobMesh& mesh, int64_t limit);

}  // namespace vescale
