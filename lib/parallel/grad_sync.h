// Gradient synchronisation: the one home of every parameter-gradient reduction.
//
// NOTE [Grad sync]
// After a step's backward, a parameter's local gradient may still need reducing:
//   - over dp (data parallel): every dp rank saw other samples, so gradients are averaged;
//   - over the parameter-mesh dims where it is Partial (a Replicate parameter used with sharded
//     activations, e.g. LayerNorm weights under sequence parallel): summed (DTensor NOTE
//     [Gradient placements]).
// GradSync packs gradients that need the same reductions into flat buckets of about
// `bucket_bytes`, filled in the order gradients become ready (reverse parameter order). The
// schedule tells it when the step's last backward on this rank starts; from then on gradient
// hooks copy each finished gradient (plus what earlier micro-batches accumulated) into its bucket
// and launch a full bucket's first reduction at once, so communication overlaps the rest of the
// backward. finish() launches what is left, chains each bucket's further reductions, waits, and
// writes the reduced gradients back. Buckets launch strictly in bucket order, so every rank
// issues the same collectives in the same order. Each gradient crosses each reduction once: the
// bytes per step are those of one all-reduce per reduction dim.
// Under ZeRO the dp reduction is a reduce-scatter (DpGrads): a bucket is packed so that each dp
// rank receives the reduced rows it owns of every gradient in it (NOTE [ZeRO pieces]); the
// further reductions then act on those pieces only.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "comm/group.h"
#include "dtensor/dtensor.h"
#include "parallel/zero/dp_pieces.h"

namespace vescale {

/// How gradients end over dp.
enum class DpGrads {
  /// Averaged by an all-reduce: every rank holds the whole gradient (no ZeRO).
  kAllReduce,
  /// Reduce-scattered after the backward (ZeRO-1): each parameter's .grad stays allocated and
  /// holds the rank's rows reduced, zeros elsewhere.
  kScatterAfterBackward,
  /// Reduce-scattered from the backward hooks (ZeRO-2 and 3): .grad tensors are released as
  /// their buckets launch; a rank keeps its reduced rows only.
  kScatterInBackward,
};

class GradSync {
 public:
  /// The ranks a parameter's gradient is averaged over (JobMesh::ParamDims::averaged's group)
  /// and the sizes of the dims they span, outer first ({dp, cp}: how a reduce-scatter's pieces
  /// nest, NOTE [ZeRO pieces]). No group, or one of size 1: nothing to average.
  struct Replicas {
    const comm::Group* group = nullptr;
    std::vector<int64_t> nesting;
  };

  /// Parameters (on their parameter mesh) and, per parameter, its replicas. Installs the
  /// gradient hooks. `reduce_dtype`: reduce in this scalar type (mixed precision: float32 for
  /// bf16 gradients; the reduced gradients are then piece_grad()s of that type, not .grad).
  GradSync(std::vector<DTensor*> params, std::vector<Replicas> replicas, int64_t bucket_bytes,
           DpGrads dp_grads = DpGrads::kAllReduce,
           std::optional<at::ScalarType> reduce_dtype = std::nullopt);
  /// Every parameter averaged over the one-dim group `dp` (none: no data parallelism).
  GradSync(std::vector<DTensor*> params, std::optional<comm::Group> dp, int64_t bucket_bytes,
           DpGrads dp_grads = DpGrads::kAllReduce,
           std::optional<at::ScalarType> reduce_dtype = std::nullopt);
  GradSync(const GradSync&) = delete;
  GradSync& operator=(const GradSync&) = delete;

  /// Adds a sum of `param`'s gradient over `group` after its other reductions: a weight tied
  /// across pipeline stages (GPT's wte / lm_head) summed over the ranks that hold it. Before
  /// the first backward.
  void add_sum(DTensor* param, comm::Group group);

  /// Called by the schedule after this rank's last forward of the step and before its last
  /// backward: the hooks of that backward fill and launch buckets.
  void start_last_backward();
  /// Launches what the hooks did not, waits, and leaves every gradient reduced (with its
  /// parameter's placements). Works without start_last_backward() too (nothing overlapped).
  /// *Collective* over dp and the parameter-mesh dims. Returns how many buckets the hooks
  /// launched during backward.
  int finish();
  /// Drops every gradient (before a step's first backward).
  void zero_grad();

  /// The reduced gradient of the rows this replica owns of parameter `k` (index into the
  /// parameters), flat, after finish(): a view that clipping may scale. Without a reduce-scatter
  /// (no ZeRO, or dp of 1) the whole flat .grad. Undefined if the parameter has none.
  at::Tensor piece_grad(size_t k) const;
  /// Bytes of the gradients held now: .grad tensors, reduced pieces and open buckets.
  int64_t grad_bytes() const;

  /// Buckets of the current layout (made at the first start_last_backward or finish).
  int buckets() const { return static_cast<int>(buckets_.size()); }

 private:
  /// One reduction of a bucket: sum over a parameter-mesh dim, or average over the replicas (an
  /// all-reduce, or a reduce-scatter that leaves each rank its pieces).
  struct Reduction {
    const comm::Group* group;
    comm::ReduceOp op;
    bool scatter = false;
  };
  struct Bucket {
    std::vector<Reduction> reductions;
    std::vector<size_t> params;
    std::vector<int64_t> offsets;
    int64_t numel = 0;
    at::ScalarType dtype = at::kFloat;
    /// Under a reduce-scatter: the params' pieces packed rank by rank (flat is packing->numel()
    /// long, made at the first fill and dropped once scattered; piece is the rank's segment).
    std::shared_ptr<DpPacking> packing;
    at::Tensor flat;
    at::Tensor piece;
    int ready = 0;
    size_t next_reduction = 0;  ///< reductions launched so far
    comm::Work work;            ///< the one in flight
  };
  /// The reductions parameter k's gradient needs now (empty: none).
  std::vector<Reduction> reductions_of(size_t k) const;
  /// (Re)builds the buckets if the parameters' reductions changed since the last layout.
  void plan_buckets();
  /// Plans the buckets and empties them for a backward: nothing filled or launched.
  void reset_buckets();
  void install_hooks();
  void on_grad(size_t k, const at::Tensor& grad);
  void fill(size_t k, const at::Tensor& grad);
  void launch_ready();
  void launch_next(Bucket& b);
  /// Hands parameter k's reduced gradient to its owner: .grad, or the rank's piece.
  void write_back(Bucket& b, size_t slot);
  /// Drops the .grad of parameters whose gradient went into a scattered bucket (ZeRO-2/3): all
  /// but `keep`, whose gradient autograd is about to store.
  void release_grads(size_t keep);
  /// Whether parameter k's average is a reduce-scatter.
  bool scatters(size_t k) const;
  /// Hooks, where any gradient has a reduction over more than one rank.
  void hook_if_needed();

  std::vector<DTensor*> params_;
  std::vector<Replicas> replicas_;     // per parameter
  std::optional<comm::Group> own_dp_;  // the one group of the one-group constructor
  int64_t bucket_bytes_;
  DpGrads dp_grads_;
  std::optional<at::ScalarType> reduce_dtype_;
  std::vector<at::Tensor> piece_grads_;  // per parameter, under a reduce-scatter
  std::vector<size_t> to_release_;       // filled params whose .grad autograd may still set
  std::vector<std::vector<const comm::Group*>> extra_sums_;  // per parameter
  std::list<comm::Group> extra_groups_;                      // owns what extra_sums_ points to
  bool hooked_ = false;
  bool planned_ = false;
  std::vector<std::vector<int>>
      layout_key_;  // partial dims per parameter the buckets were made for
  std::vector<Bucket> buckets_;
  static constexpr size_t kNoBucket = static_cast<size_t>(-1);
  std::vector<std::pair<size_t, size_t>> where_;  // param -> (bucket, slot)
  std::vector<bool> filled_;
  bool armed_ = false;
  int launched_in_backward_ = 0;
  std::mutex mutex_;
};

}  // namespace vescale
