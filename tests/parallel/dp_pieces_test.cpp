// ZeRO's pieces over the replica dims (NOTE [ZeRO pieces]): rows chunked over dp, then each dp
// chunk over cp, and the spec whose box is those rows in the global tensor.
#include "parallel/zero/dp_pieces.h"

#include <gtest/gtest.h>

#include "mesh/job_mesh.h"

namespace vescale {
namespace {

std::vector<std::pair<int64_t, int64_t>> ranges(const std::vector<FlatRange>& pieces) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const FlatRange& p : pieces)
    out.emplace_back(p.offset, p.numel);
  return out;
}

TEST(DpPieces, RowsChunkOverDpThenOverCp) {
  // 18 rows of 2: over dp = 4 as torch.chunk gives 5, 5, 5, 3 rows; over dp 2 then cp 2 it gives
  // 9, 9, then 5, 4 within each.
  using R = std::vector<std::pair<int64_t, int64_t>>;
  EXPECT_EQ(ranges(dp_pieces({18, 2}, {4})), (R{{0, 10}, {10, 10}, {20, 10}, {30, 6}}));
  EXPECT_EQ(ranges(dp_pieces({18, 2}, {2, 2})), (R{{0, 10}, {10, 8}, {18, 10}, {28, 8}}));
  // Fewer rows than replicas: the last ones hold none.
  EXPECT_EQ(ranges(dp_pieces({3}, {2, 2})), (R{{0, 1}, {1, 1}, {2, 1}, {3, 0}}));
}

TEST(DpPieces, SpecBoxIsTheNestedRows) {
  // A replicated [18, 2] parameter on dp = 2 x cp = 2 x tp = 2: replica dp x 2 + cp owns the rows
  // dp_pieces says, and its spec's box is those rows.
  const std::vector<FlatRange> pieces = dp_pieces({18, 2}, {2, 2});
  for (int rank = 0; rank < 8; ++rank) {
    const JobMesh mesh = JobMesh::layout(job_mesh_dims({{"dp", 2}, {"cp", 2}}, {2}), rank);
    const DTensorSpec param(mesh.mesh(), Placements(4, Placement::replicate()), {18, 2});
    const DTensorSpec piece = dp_piece_spec(param, mesh.param_dims({false}).averaged);
    EXPECT_EQ(piece.mesh.dim_names(), (std::vector<std::string>{"pp", "tp", "dp", "cp"}));
    const FlatRange& mine = pieces[mesh.dp_rank() * 2 + mesh.cp_rank()];
    EXPECT_EQ(piece.local_offset()[0] * 2, mine.offset) << "rank " << rank;
    EXPECT_EQ(piece.local_shape()[0] * 2, mine.numel) << "rank " << rank;
  }
}

}  // namespace
}  // namespace vescale
