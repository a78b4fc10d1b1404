// NOTE [Muon exchange]: on a dp x cp x tp mesh of 8 ranks, matrices split over none, one, two and
// three of its dims (uneven pieces and empty ones among them) each reach one owner per replica
// group whole, every rank gets back its box of the owner's result, and the bytes and calls the
// plan predicts are the ones the collectives count.
#include "optim/muon_exchange.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <vector>

#include "mesh/device_mesh.h"
#include "support/run_ranks.h"
#include "support/tensors.h"

namespace vescale {
namespace {

using testing::box_of;
using testing::pattern;
using testing::run_ranks;

const Placement R = Placement::replicate();
Placement S(int64_t dim) {
  return Placement::shard(dim);
}

struct Matrix {
  std::vector<int64_t> shape;
  Placements placements;   // on dp, cp, tp
  int64_t replica_groups;  // ranks over the dims that do not split it: one owner in each
};

TEST(MuonExchange, EachMatrixIsWholeAtOneOwnerAndEveryBoxComesBack) {
  const std::vector<Matrix> matrices{
      {{7, 5}, {R, R, S(0)}, 4},        // tp: uneven rows
      {{6, 9}, {S(0), R, S(1)}, 2},     // dp and tp
      {{5, 3}, {S(0), S(0), S(1)}, 1},  // all three; rows 3 + 2 over dp, then over cp
      {{4, 4}, {R, R, R}, 8},           // none: every rank its own
      {{3, 8}, {R, R, S(0)}, 4},        // tp again: the same all-to-alls
      {{1, 6}, {S(0), S(0), R}, 2},     // dp and cp: one row, so three empty pieces
      {{9, 2}, {R, S(1), S(0)}, 2},     // cp and tp, on different tensor dims
  };
  std::vector<std::atomic<int>> calls(matrices.size());
  run_ranks(8, [&](const comm::Group& world) {
    const DeviceMesh mesh(world, MeshSpec{{2, 2, 2}, {"dp", "cp", "tp"}});
    std::vector<DTensorSpec> specs;
    std::vector<at::Tensor> full, pieces;
    for (size_t j = 0; j < matrices.size(); ++j) {
      specs.emplace_back(mesh, matrices[j].placements, matrices[j].shape);
      full.push_back(pattern(matrices[j].shape, 0.3 * static_cast<double>(j)));
      pieces.push_back(box_of(full[j], specs[j]).reshape({-1}));
    }
    // A function of the whole matrix, and which matrix it was (its shape and first element).
    const auto f = [&](const at::Tensor& w) {
      for (size_t j = 0; j < full.size(); ++j)
        if (w.sizes().vec() == matrices[j].shape && at::equal(w, full[j])) ++calls[j];
      return at::matmul(at::matmul(w, w.t()), w) + 1.0;
    };
    const MuonExchange exchange(specs, 5);
    const comm::CommSnapshot before = world.stats().snapshot();
    const std::vector<at::Tensor> out = exchange.run(pieces, f);
    const comm::CommSnapshot after = world.stats().snapshot();
    for (size_t j = 0; j < matrices.size(); ++j) {
      const at::Tensor expected =
          box_of(at::matmul(at::matmul(full[j], full[j].t()), full[j]) + 1.0, specs[j]);
      EXPECT_TRUE(at::allclose(out[j].view(expected.sizes()), expected, 1e-13, 1e-13))
          << "matrix " << j << " on rank " << world.rank();
    }
    const std::map<std::string, int64_t> predicted = exchange.sent_bytes(8);
    const std::map<std::string, int64_t> all_to_alls = exchange.all_to_alls();
    for (const std::string dim : {"dp", "cp", "tp"}) {
      const auto key = std::make_pair(dim, comm::CommKind::kAllToAll);
      const auto count = [&](const comm::CommSnapshot& s) {
        const auto it = s.find(key);
        return it == s.end() ? comm::CommCount{} : it->second;
      };
      const int64_t bytes = count(after).bytes - count(before).bytes;
      const int64_t made = count(after).calls - count(before).calls;
      EXPECT_EQ(predicted.count(dim) ? predicted.at(dim) : 0, bytes)
          << dim << " rank " << world.rank();
      EXPECT_EQ(all_to_alls.count(dim) ? all_to_alls.at(dim) : 0, made) << dim;
      if (world.rank() == 0)
        std::printf("[muon exchange] rank 0 sent %lld B over %s in %lld all-to-alls\n",
                    static_cast<long long>(bytes), dim.c_str(), static_cast<long long>(made));
    }
  });
  for (size_t j = 0; j < matrices.size(); ++j)
    EXPECT_EQ(calls[j].load(), matrices[j].replica_groups) << "matrix " << j;
}

TEST(MuonExchange, OwnersShareTheWorkByFlops) {
  // Four equal matrices and one as large as all of them, split over tp = 2: the large one alone
  // at one owner, the four at the other (round-robin would give one rank 3 of the 5).
  const DeviceMesh mesh = DeviceMesh::layout(MeshSpec{{2}, {"tp"}}, 0);
  const DeviceMesh other = DeviceMesh::layout(MeshSpec{{2}, {"tp"}}, 1);
  const auto specs = [](const DeviceMesh& m) {
    std::vector<DTensorSpec> out;
    for (int i = 0; i < 4; ++i)
      out.emplace_back(m, Placements{S(0)}, std::vector<int64_t>{8, 8});
    out.emplace_back(m, Placements{S(0)}, std::vector<int64_t>{16, 16});  // 8 x the FLOPs
    return out;
  };
  const MuonExchange mine(specs(mesh), 5), theirs(specs(other), 5);
  EXPECT_DOUBLE_EQ(newton_schulz_flops(16, 16, 5), 5.0 * 6.0 * 16 * 16 * 16);
  EXPECT_DOUBLE_EQ(newton_schulz_flops(8, 32, 1), 4.0 * 8 * 8 * 32 + 2.0 * 8 * 8 * 8);
  EXPECT_TRUE(mine.owns(4));
  for (size_t j = 0; j < 4; ++j) {
    EXPECT_FALSE(mine.owns(j));
    EXPECT_TRUE(theirs.owns(j));
  }
  EXPECT_DOUBLE_EQ(mine.owned_flops(), newton_schulz_flops(16, 16, 5));
  EXPECT_DOUBLE_EQ(theirs.owned_flops(), 4 * newton_schulz_flops(8, 8, 5));
}

}  // namespace
}  // namespace vescale
