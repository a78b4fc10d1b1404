// Task: what a model is trained on and how its loss is taken — the model itself, its batches,
// its loss, its cost per sample and its ordered layers (for cutting into pipeline stages). The
// trainer, schedules and evaluator talk to a Task and never ask which model it is.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/job_config.h"
#include "data/token_data.h"
#include "dmodule/module.h"
#include "family/layered_model.h"
#include "family/model_family.h"
#include "parallel/pipeline/stage_split.h"

namespace vescale {

/// One micro-batch as plain tensors, the same on every rank of the parameter mesh, and what its
/// forward is for (training with its dropout key, or evaluation).
struct Batch {
  at::Tensor inputs;
  at::Tensor targets;
  ForwardContext context;
};

class Task {
 public:
  virtual ~Task() = default;

  /// The model (parameters declared, not yet materialised: parallelize_module does that).
  virtual std::shared_ptr<Module> model() const = 0;
  /// "fortunes.txt: 3.2M train / 357K val tokens" or "teacher regression".
  virtual std::string data_description() const = 0;

  /// Rows `slice` of step `step`'s global batch, for training (dropout on, keyed by the rows).
  virtual Batch train_batch(int64_t step, const BatchSlice& slice) = 0;
  /// How many validation batches there are, at most `limit`.
  virtual int64_t val_batches(int64_t limit) const = 0;
  /// Validation batch `index`, for evaluation (dropout off).
  virtual Batch val_batch(int64_t index) = 0;

  /// The model's inputs for `batch`, Replicate on `mesh`.
  virtual Tensors inputs(const Batch& batch, const DeviceMesh& mesh) const = 0;
  /// The mean loss of the model's `outputs` on `batch`: a Replicate scalar on `mesh`.
  virtual DTensor loss(const Tensors& outputs, const Batch& batch,
                       const DeviceMesh& mesh) const = 0;
  /// Whether the model's last layer takes the loss itself when its forward context carries the
  /// targets (ForwardContext::targets, NOTE [Fused LM loss]).
  virtual bool fuses_loss() const { return false; }
  /// `batch`'s forward context for a forward that ends in the loss: with the targets when the
  /// model fuses its loss.
  ForwardContext loss_context(const Batch& batch) const;
  /// The mean loss from the last layer's outputs of a forward run under loss_context(batch).
  DTensor loss_of(const Tensors& outputs, const Batch& batch, const DeviceMesh& mesh) const;

  /// Tokens a sample counts for in tokens/s (GPT: the sequence length; MLP: 1).
  virtual double tokens_per_sample() const = 0;
  /// FLOPs of forward and backward per sample (for MFU): the sum over layers().
  double flops_per_sample() const;
  /// The model's layers in forward order.
  virtual std::vector<Layer> layers() const = 0;
  /// A mixture of experts: what its routers measured in step `step`'s training forwards on
  /// this rank (LayeredModel::router_stats); nullopt for models without experts.
  virtual std::optional<RouterStats> router_stats(int64_t step) const {
    (void)step;
    return std::nullopt;
  }
  /// Runs layers [first, end) of layers() on `inputs` under `context`: layer 0 takes inputs(),
  /// the last one's outputs go to loss(). What a pipeline stage runs. *Collective* over the
  /// parameter mesh.
  virtual Tensors run_layers(int64_t first, int64_t end, const Tensors& inputs,
                             const ForwardContext& context) const = 0;

  /// The model's outputs on `batch`: inputs, then the layers run by `run` (all of them, in one
  /// call). *Collective* over `mesh`.
  Tensors forward_outputs(const Batch& batch, const DeviceMesh& mesh, const LayerRunner& run) const;
  /// The mean loss of the model on `batch`: the layers under loss_context, then loss_of.
  /// *Collective* over `mesh`.
  DTensor forward_loss(const Batch& batch, const DeviceMesh& mesh, const LayerRunner& run) const;
};

/// The task of the job's model family's objective: next-token prediction on the job's token data,
/// or teacher-student regression. Loads (or makes) the data; throws UserError on bad data.
std::unique_ptr<Task> make_task(const JobConfig& config);

/// The layers of `model`, the model build_model(config) made: the list make_task(config)->layers()
/// gives, without loading any data (and with deferred init, without allocating the model).
/// `model` must be a LayeredModel.
std::vector<Layer> model_layers(const JobConfig& config, Module& model);
/// `model` as the ordered layers it is (every family's model is one).
LayeredModel& as_layered(Module& model);
/// The layers as the pipeline's stage split takes them (cost: FLOPs per sample).
std::vector<pipeline::StageLayer> stage_layers(const std::vector<Layer>& layers);

}  // namespace vescale
