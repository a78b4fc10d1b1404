// Teacher-student regression for regression families (the MLP): mean squared error against a
// fixed random teacher.
#pragma once

#include "data/regression_data.h"
#include "train/task.h"

namespace vescale {

class RegressionTask : public Task {
 public:
  /// Builds the model of `config` and its teacher.
  explicit RegressionTask(const JobConfig& config);

  std::shared_ptr<Module> model() const override { return model_; }
  std::string data_description() const override { return "teacher regression"; }
  Batch train_batch(int64_t step, const BatchSlice& slice) override;
  int64_t val_batches(int64_t limit) const override { return limit; }
  Batch val_batch(int64_t index) override;
  Tensors inputs(const Batch& batch, const DeviceMesh& mesh) const override;
  DTensor loss(const Tensors& outputs, const Batch& batch, const DeviceMesh& mesh) const override;
  double tokens_per_sample() const override { return 1.0; }
  std::vector<Layer> layers() const override { return layers_; }
  Tensors run_layers(int64_t first, int64_t end, const Tensors& inputs,
                     const ForwardContext& context) const override {
    return layered_.run_layers(first, end, inputs, context);
  }

 private:
  std::shared_ptr<Module> model_;
  LayeredModel& layered_;
  std::vector<Layer> layers_;
  TeacherRegression teacher_;
  at::ScalarType dtype_;       ///< the model's inputs (bfloat16 runs: bf16)
  at::ScalarType loss_dtype_;  ///< the loss and targets (bfloat16 runs: float32)
  int64_t val_rows_;
};

}  // namespace vescale
