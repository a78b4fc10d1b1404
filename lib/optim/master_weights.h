// Master weights for mixed precision (docs/design.md §16): parameters compute in bf16, the
// optimizer updates float32 copies of the same elements (its state is float32 too), and each step
// rounds the copies into the parameters. The copies and their gradients are each one flat buffer
// (NOTE [Adjacent runs]). Checkpoints save the copies, so a bf16 run's checkpoint is
// the float32 state of the job and loads into float32 runs (and back).
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <vector>

#include "optim/flat_layout.h"
#include "optim/param_view.h"

namespace vescale {

class MasterWeights {
 public:
  /// `views`: the optimizer's views of low-precision parameters; `initial(view)` gives the
  /// float32 value of a view's elements (the parameters before they were rounded).
  MasterWeights(std::vector<ParamView> views,
                const std::function<at::Tensor(const ParamView&)>& initial);
  MasterWeights(const MasterWeights&) = delete;
  MasterWeights& operator=(const MasterWeights&) = delete;

  /// The views the optimizer steps: the same elements as float32 copies, whose gradients are
  /// those take_grads() took.
  const std::vector<ParamView>& views() const { return masters_; }
  /// Takes this step's gradients of the parameters as float32: as they are when grad sync left
  /// them float32 (it reduces in float32), else copied into one float32 buffer made at the first
  /// step that needs it; no allocation after that. Once a step, before clipping and the update.
  void take_grads();
  /// Rounds every copy into its parameter's elements (after an optimizer step or a load).
  void copy_to_params();
  /// Bytes of the copies.
  int64_t bytes() const;
  /// Bytes of the float32 gradient buffer (0 until a step needs it).
  int64_t grad_bytes() const;

 private:
  std::vector<ParamView> params_;   // the low-precision elements
  std::vector<ParamView> masters_;  // the float32 copies
  std::vector<at::Tensor> grads_;   // per view: this step's float32 gradient, or undefined
  FlatLayout layout_;               // where each view's elements lie in the flat buffers
  at::Tensor grad_buffer_;
  /// copy_to_params()'s operands, {parameters, copies}, merged once (NOTE [Adjacent runs]).
  std::vector<std::vector<at::Tensor>> copy_runs_;
};

}  // namespace vescale
