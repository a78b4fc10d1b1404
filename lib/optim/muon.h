// NOTE [Muon]
// Muon (Keller Jordan, 2024; torch.optim.Muon's update to the formula) for the hidden layers'
// 2-D weights, AdamW for the rest: embeddings, the LM head, norms, biases and a mixture's router
// (ModelFamily::hidden_matrix says which; each expert's weights are matrices of their own). For a
// matrix with gradient g and momentum buffer m:
//   m <- m + (1 - mu) (g - m);   u = g + mu (m - g) with Nesterov, else m
//   O = NS(u): u / max(|u|_F, eps), then 5 quintic Newton-Schulz steps X <- a X + (b A + c A^2) X,
//       A = X X^T (a, b, c = 3.4445, -4.7750, 2.0315), on the wide orientation
//   W <- W (1 - lr wd) - lr s O,  s = 0.2 sqrt(max(rows, cols)) (AdamW's RMS, Moonlight) or
//       sqrt(max(1, rows / cols)) (optimizer.muon_match_adamw_rms = false)
// in the parameters' optimizer dtype (float32, float64 under float64: 1 process and every layout
// agree to rounding).
// Distributed: Newton-Schulz needs the whole matrix, and a view holds a box of it: a tp shard,
// ZeRO's rows of one, or both. The momentum is elementwise, on the box. Then, by how many mesh
// dims split the view (its spec's Shard dims):
//   none (1 process, dp without ZeRO, cp, pp stages' own layers, ep ranks' own experts): each
//     rank orthogonalizes its whole matrix, as every replica does;
//   one (tp, or ZeRO's dp): the matrices are dealt round-robin over that dim's group, the j-th
//     to rank j mod n: an all-to-all brings the owner every rank's box, the owner orthogonalizes
//     the whole matrix, and a second all-to-all returns each rank its box; each matrix is
//     orthogonalized once, and its pieces cross the group once each way ((n - 1) / n of its
//     bytes in all, each way: half a dp2 or tp2 rank's box per matrix);
//   two (tp and ZeRO together): the box is placed in a zero matrix and summed over both dims
//     (each element has one nonzero term, so the sum is the matrix exactly), and every rank that
//     holds a piece orthogonalizes it (2 (n - 1) / n of its bytes a dim, n times the FLOPs).
// The same whole matrix and ops give the same bits wherever they run, so every layout is the
// 1-process run to rounding. The bytes are counted under the split dims' labels.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "optim/adamw.h"
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
  std::vector<std::string> state_names() const override { return {"muon_momentum"}; }
  /// AdamW's states, then each matrix's momentum.
  std::vector<OptimizerStateTensor> state_tensors() override;
  int64_t state_bytes() const override;
  /// How many views Muon updates.
  size_t matrices() const { return matrices_.size(); }

 private:
  /// The whole matrix of view k from this rank's box `piece` of it, summed (NOTE [Muon]).
  at::Tensor whole(size_t k, const at::Tensor& piece) const;
  /// This rank's box of the j-th matrix's orthogonalized update, from its box `u` of the update:
  /// computed here, by the matrix's owner (one split dim), or from the summed whole (NOTE [Muon]).
  at::Tensor orthogonal_piece(size_t j, const at::Tensor& u) const;
  /// The momentum of the j-th matrix (view matrices_[j]); every one made, zeros, on first use,
  /// in one flat buffer per dtype and device.
  at::Tensor& momentum(size_t j);

  MuonOptions options_;
  std::vector<size_t> matrices_;  ///< the views Muon updates
  AdamW adamw_;                   ///< over the other views
  std::vector<at::Tensor> momentum_;
};

}  // namespace vescale
