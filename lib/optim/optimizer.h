// Optimizers over DTensor parameters, the learning-rate schedule, and clipping by the global
// gradient norm.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "dtensor/dtensor.h"
#include "mesh/device_mesh.h"

namespace vescale {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  /// One update of every parameter that has a gradient, at learning rate `lr`. Not collective.
  virtual void step(double lr) = 0;
  /// Names of the per-parameter state tensors ("exp_avg", "exp_avg_sq"; "momentum_buffer").
  virtual std::vector<std::string> state_names() const = 0;
  /// State tensor `name` of parameter `index` (shaped like its local shard), made zeros if the
  /// optimizer has not stepped yet (for checkpoints).
  virtual at::Tensor& state(size_t index, const std::string& name) = 0;
  /// Updates taken so far (AdamW's bias correction depends on it).
  virtual int64_t steps() const = 0;
  virtual void set_steps(int64_t steps) = 0;
};

struct SGDOptions {
  double momentum = 0.9;
  double weight_decay = 0.0;  ///< L2, not on parameters with fewer than 2 dims
};

/// SGD with momentum, PyTorch's update.
class SGD : public Optimizer {
 public:
  SGD(std::vector<std::pair<std::string, DTensor*>> params, SGDOptions options);
  void step(double lr) override;
  std::vector<std::string> state_names() const override { return {"momentum_buffer"}; }
  at::Tensor& state(size_t index, const std::string& name) override;
  int64_t steps() const override { return steps_; }
  void set_steps(int64_t steps) override { steps_ = steps; }

 private:
  std::vector<std::pair<std::string, DTensor*>> params_;
  std::vector<at::Tensor> momentum_;
  SGDOptions options_;
  int64_t steps_ = 0;
};

/// Linear warmup to `peak` over `warmup` steps, then cosine decay to min_ratio x peak at `total`
/// (or constant).
double lr_at(int64_t step, int64_t total, double peak, int64_t warmup, bool cosine,
             double min_ratio);

/// The norm of all gradients as one vector, each element counted once however it is sharded or
/// replicated on `mesh`. *Collective* over the mesh dims that shard some parameter.
double global_grad_norm(const std::vector<DTensor*>& params, const DeviceMesh& mesh);
/// Scales every gradient so the global norm is at most `max_norm` (PyTorch's clip_grad_norm_).
/// Returns the norm before clipping.
double clip_grad_norm(const std::vector<DTensor*>& params, const DeviceMesh& mesh, double max_norm);

}  // namespace vescale
