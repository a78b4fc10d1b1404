#include "train/task.h"

#include "core/error.h"
#include "train/lm_task.h"
#include "train/regression_task.h"

namespace vescale {

double Task::flops_per_sample() const {
  double total = 0;
  for (const Layer& layer : layers())
    total += layer.flops_per_sample;
  return total;
}

Tensors Task::forward_outputs(const Batch& batch, const DeviceMesh& mesh,
                              const LayerRunner& run) const {
  const auto n = static_cast<int64_t>(layers().size());
  return run(0, n, inputs(batch, mesh), batch.context);
}

ForwardContext Task::loss_context(const Batch& batch) const {
  ForwardContext context = batch.context;
  if (fuses_loss()) context.targets = batch.targets;
  return context;
}

DTensor Task::loss_of(const Tensors& outputs, const Batch& batch, const DeviceMesh& mesh) const {
  return fuses_loss() ? outputs.at(0) : loss(outputs, batch, mesh);
}

DTensor Task::forward_loss(const Batch& batch, const DeviceMesh& mesh,
                           const LayerRunner& run) const {
  const auto n = static_cast<int64_t>(layers().size());
  return loss_of(run(0, n, inputs(batch, mesh), loss_context(batch)), batch, mesh);
}

std::unique_ptr<Task> make_task(const JobConfig& config) {
  switch (config.family().objective()) {
    case Objective::kNextToken:
      return std::make_unique<LMTask>(config);
    case Objective::kRegression:
      return std::make_unique<RegressionTask>(config);
  }
  VS_CHECK(false, "[train] no task for model.name = {}", config.model);
  return nullptr;
}

std::vector<Layer> model_layers(const JobConfig& config, Module& model) {
  return config.family().layers(config.model_spec(), model);
}

LayeredModel& as_layered(Module& model) {
  auto* layered = dynamic_cast<LayeredModel*>(&model);
  VS_CHECK(layered != nullptr, "[train] a {} model has no layers to run", model.type());
  return *layered;
}

std::vector<pipeline::StageLayer> stage_layers(const std::vector<Layer>& layers) {
  std::vector<pipeline::StageLayer> out;
  for (const Layer& l : layers)
    out.push_back({l.name, l.modules, l.flops_per_sample});
  return out;
}

}  // namespace vescale
