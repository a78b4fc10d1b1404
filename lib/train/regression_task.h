// Teacher-student regression for the MLP: mean squared error against a fixed random teacher.
#pragma once

#include "data/regression_data.h"
#include "models/mlp.h"
#include "train/task.h"

namespace vescale {

class RegressionTask : public Task {
 public:
  /// Builds the MLP of `config` and its teacher.
  explicit RegressionTask(const JobConfig& config);

  std::shared_ptr<Module> model() const override { return model_; }
  std::string data_description() const override { return "teacher regression"; }
  Batch train_batch(int64_t step, const BatchSlice& slice) override;
  int64_t val_batches(int64_t limit) const override { return limit; }
  Batch val_batch(int64_t index) override;
  Tensors inputs(const Batch& batch, const DeviceMesh& mesh) const override;
  DTensor loss(const Tensors& outputs, const Batch& batch, const DeviceMesh& mesh) const override;
  double tokens_per_sample() const override { return 1.0; }
  std::vector<Layer> layers() const override;
  Tensors run_layers(int64_t first, int64_t end, const Tensors& inputs) const override {
    return model_->run_layers(first, end, inputs);
  }

 private:
  std::shared_ptr<models::MLP> model_;
  TeacherRegression teacher_;
  at::ScalarType dtype_;       ///< the model's inputs (bfloat16 runs: bf16)
  at::ScalarType loss_dtype_;  ///< the loss and targets (bfloat16 runs: float32)
  int64_t val_rows_;
};

/// The MLP's layers: each linear (RegressionTask::layers(), also without a task).
std::vector<Layer> mlp_layers(models::MLP& model);

}  // namespace vescale
