// Where each of Muon's matrices is orthogonalized, and how its pieces get there and back.
//
// NOTE [Muon exchange]
// Newton-Schulz needs the whole matrix, and a rank holds a box of it: a tp shard, ZeRO's rows of
// one (over dp, or dp x cp), or both. The matrices split over the same mesh dims D = d_1 .. d_k
// (a spec's Shard dims) form a class; each is dealt to one owner among the ranks of D (a
// coordinate on each d_i), largest first to the least loaded by Newton-Schulz FLOPs, so every
// matrix is orthogonalized once and the owners' work is even. The pieces travel one dim at a
// time: in gather stage i every rank that holds pieces of a matrix sends them to the rank at the
// owner's coordinate on d_i, so after stage i the holders are the ranks at the owner's
// coordinates on d_1 .. d_i, each with the boxes of every coordinate on those dims, and after
// stage k the owner has them all. It builds the matrix, orthogonalizes it and sends the boxes
// back by the same stages in reverse. A stage is one all-to-all over d_i's group for the whole
// class (every matrix's pieces in one buffer), so a step makes 2 k all-to-alls per class,
// whatever the number of matrices; each box crosses d_i once each way ((n_i - 1) / n_i of the
// matrix's bytes leave their ranks over d_i, each way). A matrix no dim splits (1 process, dp
// without ZeRO, cp, a pp stage's own layers, an ep rank's own experts) is its rank's to
// orthogonalize: its replicas each run it, and nothing moves. The plan is a function of the
// specs, the same on every rank, so plan lint and plan auto count its bytes without running it.
// The same whole matrix and ops give the same bits wherever they run: every layout is the
// 1-process run to rounding.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "dtensor/dtensor_spec.h"

namespace vescale {

/// Newton-Schulz's FLOPs on a rows x cols matrix: `steps` iterations of X X^T, (b A + c A^2) and
/// its product with X on the wide orientation (m = min, n = max): steps (4 m^2 n + 2 m^3).
double newton_schulz_flops(int64_t rows, int64_t cols, int64_t steps);

class MuonExchange {
 public:
  /// `specs[j]`: this rank's box of matrix j (a view's spec). Not collective.
  MuonExchange(std::vector<DTensorSpec> specs, int64_t ns_steps);

  /// Runs `orthogonalize` on each whole matrix at its owner and returns this rank's box of each
  /// result, flat, from its box `pieces[j]` of each matrix (flat, the same dtype for a class).
  /// *Collective* over the groups of every dim that splits a matrix (every rank of the mesh
  /// calls it, with the same specs).
  std::vector<at::Tensor> run(
      const std::vector<at::Tensor>& pieces,
      const std::function<at::Tensor(const at::Tensor&)>& orthogonalize) const;

  /// Bytes this rank sends in one run, by mesh dim name, for elements of `element_bytes`.
  std::map<std::string, int64_t> sent_bytes(int64_t element_bytes) const;
  /// The all-to-alls of one run, by mesh dim name: two a class on each dim that splits it.
  std::map<std::string, int64_t> all_to_alls() const;
  /// Newton-Schulz FLOPs this rank runs in one run (its own matrices).
  double owned_flops() const;
  /// Whether this rank orthogonalizes matrix j.
  bool owns(size_t j) const;

 private:
  /// The matrices split over the same dims of the same mesh.
  struct Class {
    DeviceMesh mesh;                          ///< the members' specs' mesh
    std::vector<int> dims;                    ///< D, dims of `mesh`
    std::vector<int64_t> me;                  ///< this rank's coordinate in `mesh`
    std::vector<size_t> matrices;             ///< j, in order
    std::vector<std::vector<int64_t>> owner;  ///< per member: its coordinate on each of D
    /// [stage i][member][q]: the elements of the member's boxes that the rank at q on d_i (and
    /// this rank's coordinates elsewhere) holds after i gather stages: what stage i moves.
    std::vector<std::vector<std::vector<int64_t>>> share;
  };
  /// The full mesh coordinates whose boxes a rank at `at` holds after `stages` gather stages.
  static std::vector<std::vector<int64_t>> held(const Class& c, size_t stages,
                                                std::vector<int64_t> at);
  /// Whether this rank holds member m's pieces after `stages` gather stages.
  static bool holds(const Class& c, size_t m, size_t stages);
  /// Elements of matrix j's boxes at `coordinates`.
  int64_t elements(size_t j, const std::vector<std::vector<int64_t>>& coordinates) const;
  /// The matrix j from its boxes at `coordinates`, flat and concatenated.
  at::Tensor assemble(size_t j, const std::vector<std::vector<int64_t>>& coordinates,
                      const at::Tensor& data) const;
  /// `whole`'s boxes at `coordinates`, flat and concatenated.
  at::Tensor cut(size_t j, const std::vector<std::vector<int64_t>>& coordinates,
                 const at::Tensor& whole) const;
  /// One class's gather, orthogonalization and scatter into `out`. *Collective.*
  void run_class(const Class& c, const std::vector<at::Tensor>& pieces,
                 const std::function<at::Tensor(const at::Tensor&)>& orthogonalize,
                 std::vector<at::Tensor>& out) const;

  std::vector<DTensorSpec> specs_;
  int64_t ns_steps_;
  std::vector<Class> classes_;
};

}  // namespace vescale
