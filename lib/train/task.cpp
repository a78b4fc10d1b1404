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

DTensor Task::forward_loss(const Batch& batch, const DeviceMesh& mesh,
                           const LayerRunner& run) const {
  const auto n = static_cast<int64_t>(layers().size());
  return loss(run(0, n, inputs(batch, mesh)), batch, mesh);
}

std::unique_ptr<Task> make_task(const JobConfig& config) {
  if (config.model == "gpt") return std::make_unique<LMTask>(config);
  return std::make_unique<RegressionTask>(config);
}

std::vector<Layer> model_layers(const JobConfig& config, Module& model) {
  if (auto* gpt = dynamic_cast<models::GPT*>(&model)) return gpt_layers(*gpt, config.seq_len);
  auto* mlp = dynamic_cast<models::MLP*>(&model);
  VS_CHECK(mlp != nullptr, "[train] no layer list for a {} model", model.type());
  return mlp_layers(*mlp);
}

std::vector<pipeline::StageLayer> stage_layers(const std::vector<Layer>& layers) {
  std::vector<pipeline::StageLayer> out;
  for (const Layer& l : layers)
    out.push_back({l.name, l.modules, l.flops_per_sample});
  return out;
}

}  // namespace vescale
