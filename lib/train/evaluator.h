// Evaluation: the validation loss, with the batches spread over dp ranks.
#pragma once

#include "train/parallel_model.h"

namespace vescale {

/// The mean loss over the task's first eval.windows validation batches (GPT: windows of the val
/// split, mean token cross entropy; MLP: validation batches); batch w runs on dp rank w mod dp,
/// through the pipeline when there is one. *Collective* over the job mesh.
double evaluate(ParallelModel& model);

}  // namespace vescale
