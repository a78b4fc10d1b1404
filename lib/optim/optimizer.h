// Optimizers over ParamViews (flat ranges of parameters' local tensors): elementwise updates,
// so a sharded or split step equals the single-device one. Their state is kept per view, in one
// flat buffer per state and dtype (NOTE [Adjacent runs]), and reported with the view's global
// place, for checkpoints.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "optim/param_view.h"

namespace vescale {

/// One state tensor of one parameter piece ("exp_avg" of "transformer.wte.weight"), shaped as
/// the piece's local box and aliasing the optimizer's state (loading writes into it).
struct OptimizerStateTensor {
  std::string param;
  std::string state;
  at::Tensor local;
  DTensorSpec spec;
};

class Optimizer {
 public:
  explicit Optimizer(std::vector<ParamView> views);
  virtual ~Optimizer() = default;
  /// One update of every view that has a gradient, at learning rate `lr`. Not collective.
  virtual void step(double lr) = 0;
  /// Names of the per-parameter state tensors ("exp_avg", "exp_avg_sq"; "momentum_buffer").
  virtual std::vector<std::string> state_names() const = 0;

  /// Every state tensor of every view with its global place (zeros before the first step).
  virtual std::vector<OptimizerStateTensor> state_tensors();
  const std::vector<ParamView>& views() const { return views_; }
  /// Bytes of the state tensors made so far (measured, not derived from the views).
  virtual int64_t state_bytes() const;
  /// Updates taken so far (AdamW's bias correction depends on it).
  int64_t steps() const { return steps_; }
  void set_steps(int64_t steps) { steps_ = steps; }

 protected:
  /// State `s` (index into state_names()) of view `k`: flat, zeros when first asked for. The
  /// first call makes every view's state, one buffer per state and per dtype and device of the
  /// views, laid out in flat_order().
  at::Tensor& state(size_t k, size_t s);

  std::vector<ParamView> views_;
  int64_t steps_ = 0;

 private:
  void make_state();

  std::vector<std::vector<at::Tensor>> state_;  // [view][state], views of flat buffers
};

}  // namespace vescale
