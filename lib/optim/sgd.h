// SGD with momentum, PyTorch's update, over ParamViews.
#pragma once

#include "optim/optimizer.h"

namespace vescale {

struct SGDOptions {
  double momentum = 0.9;
  double weight_decay = 0.0;  ///< L2, only on views with weight_decay set
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<ParamView> views, SGDOptions options);
  void step(double lr) override;
  std::vector<std::string> state_names() const override { return {"momentum_buffer"}; }

 private:
  SGDOptions options_;
  std::vector<bool> started_;  // per view: its momentum holds a gradient (it has had one)
};

}  // namespace vescale
