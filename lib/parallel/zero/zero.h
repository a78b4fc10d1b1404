// Zero: ZeRO over dp for one rank's parameters (docs/design.md §15, NOTE [ZeRO pieces]).
//   stage 1: the optimizer updates this dp rank's rows of every parameter only (its state is 1/dp);
//            grad sync reduce-scatters the gradients after the backward; the updated rows are
//            all-gathered so every rank holds whole parameters again.
//   stage 2: as 1, with the reduce-scatter launched from the backward hooks and .grad released:
//            the rank keeps only its gradient rows.
//   stage 3: the parameters too (FSDP): each rank stores its rows in their own tensor; a layer's
//            whole parameters are all-gathered just before its forward and again before its
//            backward, and freed after each (NOTE [ZeRO-3 storage]).
// Bytes per step over dp: a reduce-scatter and an all-gather of the gradients' size, as one
// all-reduce (stages 1, 2); stage 3 all-gathers twice (forward and backward): 1.5 times that.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dmodule/module.h"
#include "family/layered_model.h"
#include "mesh/job_mesh.h"
#include "optim/param_view.h"
#include "parallel/grad_sync.h"
#include "parallel/zero/dp_pieces.h"

namespace vescale {

class Zero {
 public:
  /// `params`: (FQN, local parameter on the param mesh), in grad sync's order, and `dims` each
  /// one's answers from the mesh (its state is split over its `averaged` dims). Stage 3 moves
  /// each parameter's rows into their own tensor and frees the whole ones. *Collective* over dp
  /// at stage 3 (no communication, but every rank must agree).
  Zero(int stage, std::vector<std::pair<std::string, DTensor*>> params,
       const std::vector<JobMesh::ParamDims>& dims, const JobMesh& mesh, const GradSync& grad_sync,
       int64_t bucket_bytes);
  Zero(const Zero&) = delete;
  Zero& operator=(const Zero&) = delete;

  int stage() const { return stage_; }
  /// The grad-sync mode this stage needs.
  static DpGrads dp_grads(int stage);

  /// The optimizer's views: this rank's rows of every parameter, with their spec and the
  /// reduced gradient rows grad sync leaves.
  std::vector<ParamView> optimizer_views() const;
  /// Where parameter k's rows on this rank sit in the global tensor.
  const DTensorSpec& piece_spec(size_t k) const { return specs_[k]; }
  /// Parameter k's rows on this rank, flat (stage 3: their own tensor; writes go to it).
  at::Tensor piece(size_t k) const;

  /// After the optimizer step: stages 1 and 2 all-gather every rank's updated rows to every dp
  /// rank; stage 3 drops whole copies still held (they predate the update). *Collective* over dp.
  void after_update();

  /// Stage 3: the parameters each layer of the model uses (indices into `params`).
  void set_layers(std::vector<std::vector<size_t>> layer_params);
  /// Runs layers [first, end) one at a time through `run`; at stage 3 each layer's parameters are
  /// gathered before and freed after its forward (a tied weight after its last layer of the
  /// range), gathered again when the gradient of its output arrives (before its backward) and
  /// freed when its gradient has arrived. *Collective* over dp and like `run`.
  Tensors run_layers(int64_t first, int64_t end, const Tensors& inputs,
                     const ForwardContext& context, const LayerRunner& run);

  /// Bytes of parameter memory held now: rows plus whole tensors (measured from storage sizes).
  int64_t param_bytes() const;
  /// The most bytes of whole (gathered) parameters held at once since the last call.
  int64_t take_peak_gathered_bytes();
  /// Bytes of the largest layer's whole parameters (stage 3 holds one or two at a time).
  int64_t largest_layer_bytes() const;
  /// Bytes of the parameters several layers use (a tied weight: whole from its first use in a
  /// forward to its last).
  int64_t shared_bytes() const;

 private:
  /// Stage 3 with more than one replica: parameters are stored as rows.
  bool shards_params() const { return stage_ == 3 && splits_; }
  void bucket_params(int64_t bucket_bytes);
  void to_pieces();
  /// An all-gather of parameters' rows in flight.
  struct Gather {
    std::vector<size_t> params;
    std::shared_ptr<DpPacking> packing;
    at::Tensor segment, packed;
    comm::Work work;
  };
  /// Starts the all-gather of every dp rank's rows of `params` (this rank's from piece()).
  /// *Collective* over dp.
  Gather start_all_gather(std::vector<size_t> params);
  /// Makes parameters whole on every dp rank (those already whole are skipped), after finishing
  /// a prefetch in flight. *Collective*.
  void gather(const std::vector<size_t>& params);
  /// Starts gathering parameters (an all-gather in flight while the current layer computes).
  void prefetch(const std::vector<size_t>& params);
  /// Stage 3: start_all_gather of those of `params` not whole now, one per group of replicas
  /// (a layer's experts have fewer than its other parameters: NOTE [Expert parallelism]), in
  /// the order of their first parameters; none when all are whole.
  std::vector<Gather> start_gather(const std::vector<size_t>& params);
  void finish_gather(Gather& g);
  void finish_prefetch();
  void release(size_t k);

  int stage_;
  std::vector<std::pair<std::string, DTensor*>> params_;
  std::vector<const comm::Group*> replicas_;  // per parameter: what its state is split over
  bool splits_ = false;                       // some parameter has more than one replica
  const GradSync& grad_sync_;
  std::vector<std::vector<FlatRange>> pieces_;  // [param][dp rank]
  std::vector<DTensorSpec> specs_;
  std::vector<std::vector<size_t>> buckets_;  // parameters gathered together after the update
  // Stage 3.
  std::vector<at::Tensor> rows_;  // each parameter's rows, its own storage
  std::vector<bool> whole_;       // the whole local tensor is allocated
  std::vector<std::vector<size_t>> layers_;
  std::vector<Gather> prefetched_;
  int64_t gathered_bytes_ = 0, peak_gathered_bytes_ = 0;
};

}  // namespace vescale
