// Expert parallelism: the tokens of a mixture-of-experts layer go to the ranks that hold their
// experts and come back, by all-to-all of variable sizes.
//
// NOTE [Expert parallelism]
// parallel.ep carves its ranks from the data ranks, parallel.dp x parallel.cp, dp first: with
// g = gcd(ep, dp), the mesh has dp / g x ep = g (splits the batch like dp, holds experts) and
// cp / (ep / g) x cp_ep = ep / g (splits the sequence like cp, holds experts): mesh/mesh_dims.h.
// The ep group is the ranks along ep x cp_ep, row-major (JobMesh::expert_group). Each ep rank
// holds num_experts / ep consecutive experts of every MoE layer (ExpertSlot::holder); every other
// parameter is replicated over ep and cp_ep as over dp and cp. Tokens are routed one by one, so a
// rank's tokens may be rows of the batch or positions of a sequence alike.
// A layer's forward on one rank:
//   1. routes its own rows (route_top_k) and orders the routed slots by expert (stable: by row
//      within an expert), so the slots bound for each ep rank are contiguous;
//   2. sends every ep rank the counts of its slots for each of that rank's experts (an
//      all-to-all of num_experts int64s), then the slots' rows (an all-to-all of variable sizes);
//   3. regroups what arrived by expert (source by source within each) and runs the local
//      experts on their rows (kernels::run_experts, NOTE [Grouped experts]), as one process
//      would, in the same order;
//   4. sends the results back by the reverse all-to-all, weights them and adds them at their rows.
// The backward of each all-to-all is the reverse all-to-all of the gradients. Both are labelled
// "ep" in the comm bytes: the tokens' bytes are the analytic volume of the step's routing
// (expert_dispatch_bytes).
// An expert's gradient arrives summed over the ep ranks whose tokens it computed, each of which
// took the mean loss of its own rows; grad sync then averages over the expert's replicas, the
// other data dims (JobMesh::param_dims). So the expert's weights take 1 / ep of their gradient in
// the backward: with grad sync's average, the mean over every data rank, as for the dense
// parameters. Every number is then the 1-process run's up to summation order.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "comm/group.h"
#include "kernels/grouped_experts.h"

namespace vescale {

/// Which experts of a layer this rank holds, and the ranks holding the others.
struct ExpertPlacement {
  int64_t total = 1;                ///< experts in the layer
  const comm::Group* ep = nullptr;  ///< null or one rank: every expert is here

  int64_t ranks() const { return ep == nullptr ? 1 : ep->size(); }
  int64_t count() const { return total / ranks(); }
  int64_t first() const { return ep == nullptr ? 0 : count() * ep->rank(); }
};

/// The experts' outputs for rows `h` [S, C] ordered by expert, `counts[e]` for each of the
/// layer's experts e: computed here when `placement` holds every expert, else sent to the
/// experts' ranks and back (NOTE [Expert parallelism]); `local` are this rank's experts'
/// weights. Collective over placement.ep.
at::Tensor dispatch_to_experts(const at::Tensor& h, const std::vector<int64_t>& counts,
                               const std::vector<ExpertWeights>& local,
                               const ExpertPlacement& placement);

/// The bytes each ep rank sends over ep in one forward of one MoE layer, where rank r routed
/// `counts[r][e]` slots to expert e and a row is `row_bytes`: its counts for the other ranks'
/// experts, the rows it sends to them, and the results of its own experts for the other ranks'
/// rows. A backward sends the same again (the rows' gradients, without counts).
std::vector<int64_t> expert_dispatch_bytes(const std::vector<std::vector<int64_t>>& counts,
                                           int64_t row_bytes);

}  // namespace vescale
