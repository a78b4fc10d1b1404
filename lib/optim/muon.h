// NOTE [Muon]
// Muon (Keller Jordan, 2024; torch.optim.Muon's update to the formula) for the hidden layers'
// 2-D weights, AdamW for the rest: the roles optimizer.adamw_params names (by default
// embeddings, the LM head, norms, biases and a mixture's router; ModelFamily::param_roles says
// which a parameter has; each expert's weights are matrices of their own). For a matrix with
// gradient g and momentum buffer m (optimizer.momentum mu, 0.95; optimizer.nesterov):
//   m <- m + (1 - mu) (g - m);   u = g + mu (m - g) with Nesterov, else m
//   O = NS(u): u / max(|u|_F, eps), then optimizer.ns_steps (5) quintic Newton-Schulz steps
//       X <- a X + (b A + c A^2) X, A = X X^T (a, b, c = 3.4445, -4.7750, 2.0315), on the wide
//       orientation
//   W <- W (1 - lr wd) - lr s O,  s = 0.2 sqrt(max(rows, cols)) (optimizer.muon_scale =
//       "adamw_rms": AdamW's RMS, Moonlight) or sqrt(max(1, rows / cols)) ("shape")
// in the parameters' optimizer dtype (float32, float64 under float64: 1 process and every layout
// agree to rounding).
// Distributed: the momentum is elementwise, on the rank's box of each matrix; Newton-Schulz
// needs the whole matrix, which its owner assembles, orthogonalizes and sends back in boxes
// (NOTE [Muon exchange]). The bytes are counted under the split dims' labels.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "optim/adamw.h"
#include "optim/muon_exchange.h"
#include "optim/optimizer.h"

namespace vescale {

struct MuonOptions {
  double momentum = 0.95;
  bool nesterov = true;
  int64_t ns_steps = 5;
  bool match_adamw_rms = true;
  double weight_decay = 0.1;  ///< decoupled, as AdamW's
  double eps = 1e-7;          ///< the floor of the Frobenius norm before Newton-Schulz
};

/// u / max(|u|, eps), then `steps` quintic Newton-Schulz iterations on its wide orientation: an
/// approximately orthogonal matrix of u's shape (torch.optim.Muon's zeropower_via_newtonschulz).
at::Tensor newton_schulz(const at::Tensor& u, int64_t steps, double eps);

/// The update's scale for a rows x cols matrix (NOTE [Muon]).
double muon_scale(int64_t rows, int64_t cols, bool match_adamw_rms);

class Muon : public Optimizer {
 public:
  /// Over every view (the train step reads their gradients in parameter order): Muon updates
  /// those `matrix` marks, each a box of a 2-D parameter; AdamW the others.
  Muon(std::vector<ParamView> views, const std::vector<bool>& matrix, MuonOptions options,
       AdamWOptions adamw);
  /// AdamW's step, then Muon's; collective over each matrix's split dims (every rank of the mesh
  /// calls it, with its views in the same order).
  void step(double lr) override;
  std::vector<std::string> state_names() const override { return {kMomentum}; }
  /// AdamW's states, then each matrix's momentum.
  std::vector<OptimizerStateTensor> state_tensors() override;
  int64_t state_bytes() const override;
  /// How many views Muon updates.
  size_t matrices() const { return matrices_.size(); }
  /// Where its matrices are orthogonalized (NOTE [Muon exchange]).
  const MuonExchange& exchange() const { return exchange_; }

  /// The name of a matrix's momentum in checkpoints: /optimizer/<fqn>/momentum.
  static constexpr const char* kMomentum = "momentum";

 private:
  /// The momentum of the j-th matrix (view matrices_[j]); every one made, zeros, on first use,
  /// in one flat buffer per dtype and device.
  at::Tensor& momentum(size_t j);

  MuonOptions options_;
  std::vector<size_t> matrices_;  ///< the views Muon updates
  AdamW adamw_;                   ///< over the other views
  MuonExchange exchange_;         ///< over the matrices' specs
  std::vector<at::Tensor> momentum_;
};

}  // namespace vescale
