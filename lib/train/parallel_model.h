// ParallelModel: a job's model on its mesh, standing alone. The job mesh, the task (model, data,
// loss), the plan applied to this rank's shards (deferred init), the compute dtype, the
// pipeline's stages with their runner, and where each parameter's state lives. `eval` uses it
// alone; a training Job (train/job.h) builds on it: grad sync, ZeRO, master weights, the
// optimizer and the train step.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "comm/group.h"
#include "config/job_config.h"
#include "dmodule/parallelize.h"
#include "mesh/job_mesh.h"
#include "parallel/pipeline/schedule.h"
#include "parallel/pipeline/stage_split.h"
#include "train/activation_checkpoint.h"
#include "train/pipeline_runner.h"
#include "train/task.h"

namespace vescale {

/// The pipeline's cut of a task's layers: the schedule, and per stage its layers and modules.
/// What a mixture of experts' routers did in one training step, over the whole job.
struct RouterFigures {
  double aux_loss = 0;            ///< the auxiliary loss: the mean over layers and the global batch
  double load_max_over_mean = 0;  ///< the most unbalanced layer's max / mean tokens per expert
};

struct PipelinePlan {
  pipeline::PipelineSchedule schedule;
  std::vector<pipeline::Stage> stages;
  std::vector<std::vector<std::string>> modules;  ///< per stage
};

/// `config`'s schedule (parallel.pp_schedule, pp_virtual, microbatches) and its split of
/// `layers` (parallel.pp_split). Throws UserError saying what would work.
PipelinePlan plan_pipeline(const JobConfig& config, const std::vector<Layer>& layers);

/// What a model is built for.
enum class JobPurpose {
  kTrain,     ///< a training Job builds on it: keeps a bf16 model's float32 initial values
  kEvaluate,  ///< its forward only
};

/// A weight several pp ranks hold (tied across pipeline stages, e.g. GPT's wte and lm_head):
/// its gradient is summed over its holders, and the rank of its first stage saves it.
struct TiedParameter {
  size_t index = 0;     ///< into ParallelModel::params()
  comm::Group holders;  ///< the pp ranks holding it
  bool saved_here = false;
};

/// Where a parameter's state (its values as saved, loaded and updated) lives on this rank: a
/// tensor and its place on the job mesh.
struct ParameterState {
  at::Tensor local;
  DTensorSpec spec;
};

/// Runs layers [first, end) around `run`: what a training job puts around every layer run
/// (ZeRO-3 gathers a layer's parameters before it and frees them after).
using LayerWrapper = std::function<Tensors(int64_t first, int64_t end, const Tensors& inputs,
                                           const ForwardContext& context, const LayerRunner& run)>;

class ParallelModel {
 public:
  /// Builds the model of `config` on the ranks of `world` (its size must be the config's mesh
  /// size): mesh, task, plan, deferred init of this rank's shards (under a pipeline, of its
  /// stages only), the compute dtype, the tied weights' groups and the pipeline runner.
  /// *Collective* over `world`.
  ParallelModel(const JobConfig& config, const comm::Group& world, JobPurpose purpose);
  ParallelModel(const ParallelModel&) = delete;
  ParallelModel& operator=(const ParallelModel&) = delete;

  const JobConfig& config() const { return config_; }
  const JobMesh& mesh() const { return mesh_; }
  Task& task() const { return *task_; }
  ParallelizedModule& module() const { return *module_; }
  /// This rank's trainable parameters, each once, by FQN, in the model's order: all of them but
  /// a LoRA job's frozen base (NOTE [LoRA]). What grad sync, ZeRO, the optimizer and
  /// checkpoints iterate.
  const std::vector<std::pair<std::string, DTensor*>>& params() const { return params_; }
  /// This rank's frozen parameters (a LoRA job's base), each once, by FQN: loaded from the base,
  /// never trained nor saved.
  const std::vector<std::pair<std::string, DTensor*>>& frozen() const { return frozen_; }
  /// Over which dims parameter k's gradient is averaged, its ZeRO state split, its norm reduced
  /// and its checkpoint deduped (NOTE [Dims by role]): from its placements, and whether it is an
  /// expert's.
  JobMesh::ParamDims param_dims(size_t k) const;
  /// The same for every parameter, in order.
  std::vector<JobMesh::ParamDims> param_dims() const;
  /// Elements of the whole model (every stage, unsharded).
  int64_t n_params() const { return n_params_; }
  /// Weights this rank holds that other pp ranks hold too.
  const std::vector<TiedParameter>& tied() const { return tied_; }
  /// Whether this rank saves parameter `fqn` (a tied weight: only the rank of its first stage).
  bool saves(const std::string& fqn) const { return !not_saved_.count(fqn); }
  /// The pipeline's runner (pp > 1), else null.
  PipelineRunner* pipeline() const { return pipeline_.get(); }
  /// The parameters (indices into params()) each of the task's layers uses on this rank.
  std::vector<std::vector<size_t>> layer_params() const;
  /// "<job>: GPT with N parameters on <mesh> (<plan> plan), <dtype>, <data>", for the log.
  std::string description() const;

  /// Parameter k's state: its local shard (in the state dtype, but in an evaluation of a bf16
  /// model), unless a training job moved it (move_state).
  ParameterState state(size_t k) const;
  /// Parameter k's state lives in `local` from now on (ZeRO-3's rows, float32 master weights).
  void move_state(size_t k, ParameterState state);
  /// A bf16 model's float32 initial values by FQN, moved out (empty after the first call, and
  /// for float32 models or an evaluation).
  std::map<std::string, at::Tensor> take_float32_init() { return std::move(float32_init_); }

  /// Micro-batch `micro` of training step `step` on this rank: its dp slice, the micro-batch's
  /// rows, and under context parallelism this rank's part of each sequence.
  Batch micro_batch(int64_t step, int64_t micro) const;
  /// A mixture of experts' routers over training step `step` on the whole job (NOTE [MoE
  /// auxiliary loss]); nullopt for a model without experts (then nothing is communicated).
  /// *Collective* over the job mesh; reads the device once.
  std::optional<RouterFigures> router_figures(int64_t step) const;
  /// Validation batch `index` as this rank runs it (its part of each sequence under cp).
  Batch val_batch(int64_t index) const;
  /// Runs the task's layers, recomputing in the backward as training.activation_checkpoint
  /// says, inside the wrapper a training job installed.
  LayerRunner layer_runner();
  /// Puts `wrapper` around every layer run from now on; `collective_over_dp`: it communicates
  /// over dp, so every dp rank must run as many forwards.
  void wrap_layers(LayerWrapper wrapper, bool collective_over_dp);
  /// Whether a forward is collective over dp (every dp rank must run as many): ZeRO-3 gathers
  /// over dp, expert parallelism sends tokens over ep.
  bool forward_collective_over_dp() const { return collective_over_dp_ || mesh_.ep() > 1; }
  /// The mean loss of `batch` without gradients (under a pipeline: on the last stage's rank,
  /// 0 on the others). *Collective* over the parameter mesh (and the pp group).
  double forward_loss(const Batch& batch);
  /// The model's output on `batch` (logits), for any rows and sequence length: on every rank, or
  /// under a pipeline on the last stage's ranks (empty on the others). *Collective* over the
  /// parameter mesh (and the pp group).
  std::optional<DTensor> forward_outputs(const Batch& batch);

 private:
  /// Each of module_'s parameters (by any name) to its index in params_.
  std::map<const Parameter*, size_t> param_index() const;
  void find_tied(const PipelinePlan& plan);
  void make_pipeline(const PipelinePlan& plan);
  /// `batch` cut to this rank's part of each sequence, its context on the cp ring (cp > 1).
  Batch sequence_part(Batch batch) const;

  JobConfig config_;
  JobMesh mesh_;
  std::shared_ptr<comm::FlightRecorder> flight_;  // the rank's: layers name their collectives
  std::unique_ptr<Task> task_;
  std::unique_ptr<ParallelizedModule> module_;
  std::vector<std::pair<std::string, DTensor*>> params_;
  std::vector<std::pair<std::string, DTensor*>> frozen_;
  std::vector<bool> expert_;  ///< per parameter: an expert's (held by one ep rank)
  int64_t n_params_ = 0;
  double init_s_ = 0;  ///< building this rank's parameters (NOTE [Fast init] in dtensor/random.cpp)
  std::vector<TiedParameter> tied_;
  std::set<std::string> not_saved_;
  std::vector<std::optional<ParameterState>> moved_;  ///< per parameter: where move_state put it
  std::map<std::string, at::Tensor> float32_init_;
  std::unique_ptr<ActivationCheckpoint> recompute_;  ///< training.activation_checkpoint, if on
  LayerWrapper wrapper_;
  bool collective_over_dp_ = false;
  std::unique_ptr<PipelineRunner> pipeline_;
};

}  // namespace vescale
