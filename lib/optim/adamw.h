// AdamW (decoupled weight decay, PyTorch's update to the bit) over ParamViews. On CUDA tensors
// (not float64) PyTorch's fused kernel takes the same step where LibTorch has it:
// NOTE [Fast paths].
#pragma once

#include <map>
#include <string>
#include <utility>

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
  AdamW(std::vector<ParamView> views, AdamWOptions options);
  /// One update with learning rate `lr` from each view's gradient (skips those without one).
  void step(double lr) override;
  std::vector<std::string> state_names() const override { return {"exp_avg", "exp_avg_sq"}; }

 private:
  /// Elements of the explicit update's scratch buffer: a chunk of each pass stays in cache.
  static constexpr int64_t kScratchElements = int64_t{1} << 16;
  /// The explicit update's scratch for tensors like `like` (dtype and device), made once.
  at::Tensor scratch(const at::Tensor& like);

  AdamWOptions options_;
  std::map<std::pair<at::ScalarType, std::string>, at::Tensor> scratch_;
};

}  // namespace vescale
