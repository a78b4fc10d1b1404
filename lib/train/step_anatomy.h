// Where a step's time goes on a rank: the phases the train step measures, and the time blocked in
// collectives by mesh dim that comm/ counts.
//
// NOTE [Step anatomy]
// Each step's metrics say where its time went on the rank: the schedule's forwards and backwards
// (collectives inside them included), a pipeline rank's bubble (waiting for other stages, not in
// the forwards and backwards), finishing grad sync after the last backward, and the optimizer
// (the loss and norm all-reduces, clipping, the update); the rest of the step (data, the stop
// agreement, metrics, evaluation) is "other". Apart from these phases, comm/ counts the time each
// rank was blocked in a collective's or transfer's wait, by mesh dim: time blocked, not time in
// flight (an all-reduce overlapped with the backward costs nothing here until it is waited for).
// A checkpoint save follows its step's metrics line (so that a crash repeats the line rather
// than loses it): the time it stalls training is the next line's checkpoint_stall_s, outside
// step_time_s (for checkpoint.async, the copy to host memory and any wait for the last write).
#pragma once

namespace vescale {

/// Where a step's time went on this rank (NOTE [Step anatomy]).
struct StepAnatomy {
  double forward_s = 0, backward_s = 0;  ///< the schedule's, collectives inside them included
  double bubble_s = 0;                   ///< a pipeline rank idle, waiting for other stages
  double grad_sync_s = 0;  ///< finishing the gradient reduction after the last backward
  double optimizer_s = 0;  ///< the loss's and the norm's all-reduces, clipping and the update
};

}  // namespace vescale
