// Master weights for mixed precision (docs/design.md §16): parameters compute in bf16, the
// optimizer updates float32 copies of the same elements (its state is float32 too), and each step
// rounds the copies into the parameters. Checkpoints save the copies, so a bf16 run's checkpoint is
// the float32 state of the job and loads into float32 runs (and back).
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <vector>

#include "optim/param_view.h"

namespace vescale {

class MasterWeights {
 public:
  /// `views`: the optimizer's views of low-precision parameters; `initial(view)` gives the
  /// float32 value of a view's elements (the parameters before they were rounded).
  MasterWeights(std::vector<ParamView> views,
                const std::function<at::Tensor(const ParamView&)>& initial);

  /// The views the optimizer steps: the same elements as float32 copies, with gradients cast to
  /// float32.
  const std::vector<ParamView>& views() const { return masters_; }
  /// Rounds every copy into its parameter's elements (after an optimizer step or a load).
  void copy_to_params();
  /// Bytes of the copies.
  int64_t bytes() const;

 private:
  std::vector<ParamView> params_;   // the low-precision elements
  std::vector<ParamView> masters_;  // the float32 copies
};

}  // namespace vescale
