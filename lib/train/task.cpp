#include "train/task.h"

#include "train/lm_task.h"
#include "train/regression_task.h"

namespace vescale {

double Task::flops_per_sample() const {
  double total = 0;
  for (const Layer& layer : layers())
    total += layer.flops_per_sample;
  return total;
}

DTensor Task::forward_loss(const Batch& batch, const DeviceMesh& mesh) const {
  return loss((*model())(inputs(batch, mesh)), batch, mesh);
}

std::unique_ptr<Task> make_task(const JobConfig& config) {
  if (config.model == "gpt") return std::make_unique<LMTask>(config);
  return std::make_unique<RegressionTask>(config);
}

}  // namespace vescale
