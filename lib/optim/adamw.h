// AdamW (decoupled weight decay, PyTorch's update to the bit) on the local shards of DTensor
// parameters: elementwise, so a sharded step equals the single-device one.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

#include "dtensor/dtensor.h"
#include "optim/optimizer.h"

namespace vescale {

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
};

class AdamW : public Optimizer {
 public:
  /// Parameters by name; those with fewer than 2 dims (biases, norms) get no weight decay.
  AdamW(std::vector<std::pair<std::string, DTensor*>> params, AdamWOptions options);

  /// One update with learning rate `lr` from each parameter's local gradient (skips those
  /// without one). Not collective.
  void step(double lr) override;
  std::vector<std::string> state_names() const override { return {"exp_avg", "exp_avg_sq"}; }
  at::Tensor& state(size_t index, const std::string& name) override;
  int64_t steps() const override { return step_; }
  void set_steps(int64_t steps) override { step_ = steps; }

 private:
  struct State {
    at::Tensor exp_avg, exp_avg_sq;
  };

  std::vector<std::pair<std::string, DTensor*>> params_;
  std::vector<State> state_;
  AdamWOptions options_;
  int64_t step_ = 0;
};

}  // namespace vescale
