// PipelineRunner: the Schedule that runs a pipeline schedule's actions (parallel/pipeline/
// schedule.h) on this rank's stages.
//
// NOTE [Pipeline execution]
// Each pp rank walks its action list in order. F(s, m) runs the layers of stage s on micro-batch
// m: stage 0 takes the task's inputs, a later stage the activation of stage s-1 (handed over on
// the same rank, or received), as a leaf that requires grad; the last stage takes the task's
// loss. B(s, m) backpropagates stage s (from the loss scaled by 1/micro-batches, or from the
// gradient of its output that stage s+1 sent back) and leaves the gradient of its input for
// SEND_B. I/W split B for zero-bubble schedules: I computes only the input gradient (keeping
// the graph), W only the stage's weight gradients. Activations and gradients cross ranks by
// non-blocking isend/irecv on the pp group; a receive is posted at its RECV and waited for by the
// action that consumes it; sends are waited for at the end of the step. Shapes and placements of
// every stage boundary are found once, before the first step, by a forward without gradients
// along the pipeline (boundaries()), so the hot loop exchanges no metadata and activations
// cross still sharded (sequence parallel). The step's last backward on a rank (its last B or W)
// is announced to grad sync first.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "comm/group.h"
#include "mesh/job_mesh.h"
#include "parallel/pipeline/schedule.h"
#include "train/schedule.h"
#include "train/task.h"

namespace vescale {

/// The layers [first, end) of layers() that a stage runs, and its parameters on this rank.
struct StageLayers {
  int64_t first = 0;
  int64_t end = 0;
  std::vector<at::Tensor> params;  ///< local tensors (leaves), for the W half of the backward
};

class PipelineRunner : public Schedule {
 public:
  /// `stages`: every stage of the schedule (those of other ranks only need first/end).
  /// `sample`: a batch of micro-batch size to find the stage boundaries with. *Collective* over
  /// the pp group (a forward along the pipeline). `run_layers` runs a stage's layers (empty: the
  /// task's run_layers).
  PipelineRunner(Task& task, const JobMesh& mesh, pipeline::PipelineSchedule schedule,
                 std::vector<StageLayers> stages, const Batch& sample,
                 LayerRunner run_layers = nullptr);

  at::Tensor run(const MicroBatches& batches) override;
  int64_t microbatches() const override { return schedule_.microbatches; }

  /// The last stage's outputs of `batch` (any rows and sequence length) by a forward along the
  /// pipeline without gradients: on the ranks of the last stage; empty on the others.
  /// *Collective* over the pp group.
  std::optional<DTensor> forward_outputs(const Batch& batch);
  /// The mean loss of `batch` by a forward as forward_outputs' (the last stage under the task's
  /// loss_context): the value on the rank of the last stage, 0 on
  /// the others. *Collective* over the pp group.
  double forward_loss(const Batch& batch);
  /// Whether this rank runs the last stage (and so computes losses).
  bool has_last_stage() const;
  const pipeline::PipelineSchedule& schedule() const { return schedule_; }

  /// What the steps so far measured on this rank: the bubble is the time spent waiting for
  /// activations and gradients of other ranks over the steps' time.
  struct Stats {
    int64_t steps = 0;
    double step_s = 0;
    double idle_s = 0;
    std::map<int, int> peak_in_flight;  ///< per local stage: most micro-batches forwarded, not
                                        ///< yet backpropagated (their activations held)
  };
  const Stats& stats() const { return stats_; }

 private:
  /// forward_outputs with the last stage run under `last`.
  std::optional<DTensor> forward_through(const Batch& batch, const ForwardContext& last);
  /// What one (stage, micro-batch) holds during a step.
  struct Slot {
    Batch batch;
    std::optional<DTensor> input;   ///< past stage 0: the previous stage's output, as a leaf
    std::optional<DTensor> output;  ///< but the last stage
    at::Tensor loss;                ///< the last stage: its loss / micro-batches
    at::Tensor activation;          ///< a received input, once activation_receive is done
    comm::Work activation_receive;
    at::Tensor grad;  ///< a received gradient of the output, once grad_receive is done
    comm::Work grad_receive;
    at::Tensor output_grad;  ///< the gradient of the output (received or handed over)
    at::Tensor input_grad;   ///< the gradient of the input, for SEND_B
  };

  void boundaries(const Batch& sample);
  Tensors stage_inputs(int stage, int micro);
  void forward(int stage, int micro, const MicroBatches& batches, at::Tensor& losses);
  /// The tensor to backpropagate from and its gradient (the loss / M, or the output and the
  /// gradient stage s+1 sent back).
  std::pair<at::Tensor, at::Tensor> backward_start(int stage, int micro);
  void backward(int stage, int micro, pipeline::ActionKind kind);
  void post_receive(int stage, int micro, bool gradient);
  void send(int stage, int micro, bool gradient);
  int tag(bool gradient, int stage, int micro) const;
  Slot& slot(int stage, int micro) { return slots_[{stage, micro}]; }
  bool is_last(int stage) const { return stage + 1 == schedule_.stages(); }
  bool local(int stage) const { return schedule_.stage_rank[stage] == rank_; }

  Task& task_;
  LayerRunner run_layers_;
  const JobMesh& mesh_;
  pipeline::PipelineSchedule schedule_;
  std::vector<StageLayers> stages_;
  int rank_;  ///< this rank's pp rank
  /// Per stage s (but the last): the placements and global shape of its output, at training
  /// micro-batch size.
  std::vector<std::optional<DTensorSpec>> boundary_;
  std::vector<at::ScalarType> dtypes_;  ///< of each boundary
  size_t last_backward_ = 0;            ///< index in this rank's list of its last B or W
  std::map<std::pair<int, int>, Slot> slots_;
  std::vector<std::pair<comm::Work, at::Tensor>> sends_;  ///< pending sends and their buffers
  /// Waits for `work` and counts the time as idle.
  void wait_idle(comm::Work& work);
  Stats stats_;
  std::map<int, int> in_flight_;
};

}  // namespace vescale
