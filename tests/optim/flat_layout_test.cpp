// FlatLayout (NOTE [Adjacent runs]): entries with weight decay first, each part in order; pieces
// on the buffer's storage; and the three buffers laid out by it (a bf16 job's parameters, their
// master weights, the optimizer's state) merge into one run per pass, as they must for the
// optimizer phase to be one pass over each.
#include "optim/flat_layout.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "optim/adjacent_runs.h"
#include "optim/master_weights.h"
#include "support/run_ranks.h"

namespace vescale {
namespace {

using testing::run_ranks;

TEST(FlatLayout, DecayedEntriesFirstEachPartInOrder) {
  EXPECT_EQ(flat_order(std::vector<bool>{false, true, false, true}),
            (std::vector<size_t>{1, 3, 0, 2}));
  const FlatLayout layout({3, 5, 2, 4}, {1, 3, 0, 2});
  EXPECT_EQ(layout.total(), 14);
  const at::Tensor buffer = at::arange(14, at::kFloat);
  const std::vector<int64_t> offsets = {9, 0, 12, 5};
  for (size_t k = 0; k < offsets.size(); ++k) {
    const at::Tensor piece = layout.piece(buffer, k);
    EXPECT_EQ(piece.storage_offset(), offsets[k]) << k;
    EXPECT_EQ(piece[0].item<float>(), static_cast<float>(offsets[k])) << "piece " << k;
  }
  EXPECT_EQ(layout.piece(buffer, 3, {2, 2}).sizes().vec(), (std::vector<int64_t>{2, 2}));
  EXPECT_TRUE(follows(layout.piece(buffer, 1), layout.piece(buffer, 3)));
  EXPECT_FALSE(follows(layout.piece(buffer, 0), layout.piece(buffer, 1)));
}

TEST(FlatLayout, RefusesAnOrderThatIsNotAPermutationAndAForeignBuffer) {
  EXPECT_THROW(FlatLayout({1, 2}, {0, 0}), Error);
  EXPECT_THROW(FlatLayout({1, 2}, {0}), Error);
  EXPECT_THROW(FlatLayout({1, 2}, {0, 2}), Error);
  const FlatLayout layout({1, 2}, {0, 1});
  EXPECT_THROW(layout.piece(at::zeros({4}), 0), Error);
  EXPECT_THROW(layout.piece(at::zeros({3}), 1, {3}), Error);
}

TEST(FlatLayout, ParametersMastersAndStateMergeIntoOneRun) {
  run_ranks(1, [](const comm::Group& world) {
    DeviceMesh mesh(world, MeshSpec{{1}, {"dp"}});
    // A norm, a matrix, a bias and a matrix, as a model lists them: bf16, in one flat buffer laid
    // out as to_compute_dtype lays them (by takes_weight_decay of their dims).
    const std::vector<std::vector<int64_t>> shapes = {{4}, {3, 4}, {3}, {2, 3}};
    std::vector<int64_t> numels;
    std::vector<bool> decays;
    for (const auto& shape : shapes) {
      numels.push_back(c10::multiply_integers(shape));
      decays.push_back(takes_weight_decay(static_cast<int64_t>(shape.size())));
    }
    const FlatLayout layout(numels, flat_order(decays));
    const at::Tensor buffer = at::zeros({layout.total()}, at::kBFloat16);
    std::vector<DTensor> params;
    for (size_t k = 0; k < shapes.size(); ++k) {
      params.emplace_back(layout.piece(buffer, k, shapes[k]),
                          DTensorSpec(mesh, {Placement::replicate()}, shapes[k]));
    }
    std::vector<std::pair<std::string, DTensor*>> named;
    for (size_t k = 0; k < params.size(); ++k)
      named.emplace_back("p" + std::to_string(k), &params[k]);
    const std::vector<ParamView> views = whole_views(named);
    MasterWeights masters(views, [](const ParamView& v) { return v.flat.to(at::kFloat); });
    const std::vector<at::Tensor> state = flat_zeros(masters.views());
    std::vector<std::vector<at::Tensor>> lists(3);
    for (size_t k = 0; k < views.size(); ++k) {
      lists[0].push_back(views[k].flat);
      lists[1].push_back(masters.views()[k].flat);
      lists[2].push_back(state[k]);
    }
    const auto runs = merge_adjacent(lists);
    EXPECT_EQ(runs.front().size(), 1u) << "the parameters, masters and state are laid out apart";
  });
}

}  // namespace
}  // namespace vescale
