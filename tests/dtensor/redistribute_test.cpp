// Every ordered pair of placements, even and uneven shapes: forward values equal the logical
// tensor, gradients equal single-device autograd (NOTE [Gradient placements]), and the bytes
// counted equal the analytic volume of each move (NOTE [Communication volume]).
#include "dtensor/redistribute.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdio>

#include "core/error.h"
#include "dtensor/dtensor.h"
#include "support/expect_close.h"
#include "support/run_ranks.h"
#include "support/tensors.h"

namespace vescale {
namespace {

using testing::box_of;
using testing::expect_close;
using testing::pattern;
using testing::run_ranks;

/// This rank's piece of a full tensor under a spec (Partial dims keep the whole).

/// The value a rank holds before reduction over the partial mesh dims at coordinate `coord`.
at::Tensor partial_piece(const at::Tensor& x, const at::Tensor& y, const Placements& placements,
                         const std::vector<int64_t>& coord) {
  double k = 0;
  for (size_t i = 0; i < placements.size(); ++i) {
    if (placements[i].is_partial()) k += (coord[i] + 1) * (i + 1.5);
  }
  return x + 0.25 * k * y;
}

/// Bytes this rank sends for one move (NOTE [Communication volume]).
int64_t analytic_bytes(const DTensorSpec& cur, const RedistributeStep& step, int64_t elem) {
  const auto local = cur.local_shape();
  const int64_t numel = c10::multiply_integers(local);
  const int64_t n = cur.mesh.size(step.mesh_dim);
  const int me = cur.mesh.group(step.mesh_dim).rank();
  const Placement& from = cur.placements[step.mesh_dim];
  auto kept = [&](int64_t dim) {
    if (local[dim] == 0) return int64_t{0};
    return numel / local[dim] * cur.group_piece_sizes(step.mesh_dim, dim)[me];
  };
  if (from.is_shard() && step.to.is_replicate()) return (n - 1) * numel * elem;
  if (from.is_shard() && step.to.is_shard()) return (numel - kept(step.to.dim)) * elem;
  if (from.is_partial() && step.to.is_replicate()) return 2 * (n - 1) * numel * elem / n;
  if (from.is_partial() && step.to.is_shard()) return (numel - kept(step.to.dim)) * elem;
  return 0;  // R -> S, R -> P
}

/// Runs src -> dst on one shape; checks values, gradients and bytes on this rank.
/// Returns the max relative error seen.
double check_pair(const DeviceMesh& mesh, const std::vector<int64_t>& shape, const Placements& src,
                  const Placements& dst) {
  const std::string label = fmt::format("{} -> {} of [{}] on {}", placements_str(src),
                                        placements_str(dst), fmt::join(shape, ","), mesh.str());
  const at::Tensor x = pattern(shape, 0.1);
  const at::Tensor y = pattern(shape, 1.7);
  const at::Tensor w = pattern(shape, 2.9);  // dL/d(value)
  const DTensorSpec src_spec(mesh, src, shape);

  // The logical value: reduce the partial pieces over every coordinate of the partial dims.
  std::vector<int> partial_dims;
  for (int i = 0; i < mesh.ndim(); ++i) {
    if (src[i].is_partial()) partial_dims.push_back(i);
  }
  const auto me = mesh.coordinate();
  at::Tensor value;
  std::vector<at::Tensor> pieces;  // along a single partial dim, for P(max) ties
  int64_t combos = 1;
  for (int i : partial_dims)
    combos *= mesh.size(i);
  for (int64_t c = 0; c < combos; ++c) {
    auto coord = me;
    int64_t rest = c;
    for (auto it = partial_dims.rbegin(); it != partial_dims.rend(); ++it) {
      coord[*it] = rest % mesh.size(*it);
      rest /= mesh.size(*it);
    }
    at::Tensor piece = partial_piece(x, y, src, coord);
    pieces.push_back(piece);
    if (!value.defined()) {
      value = piece.clone();
    } else if (src[partial_dims[0]].reduce == comm::ReduceOp::kMax) {
      value = at::maximum(value, piece);
    } else {
      value = value + piece;
    }
  }
  if (!value.defined()) value = x;
  if (!partial_dims.empty() && src[partial_dims[0]].reduce == comm::ReduceOp::kAvg)
    value = value / combos;

  at::Tensor local = box_of(partial_dims.empty() ? x : partial_piece(x, y, src, me), src_spec);
  local.requires_grad_(true);
  DTensor in(local, src_spec);

  comm::CommStats& stats = mesh.world().stats();
  const int64_t before = stats.total_bytes();
  DTensor out = in.redistribute(dst);
  const int64_t counted = stats.total_bytes() - before;

  // Bytes: the sum of the analytic volume of each planned move.
  int64_t expected_bytes = 0;
  DTensorSpec cur = src_spec;
  for (const auto& step : plan_redistribute(src_spec, dst)) {
    expected_bytes += analytic_bytes(cur, step, 8);
    Placements next = cur.placements;
    next[step.mesh_dim] = step.to;
    cur = cur.with_placements(next);
  }
  EXPECT_EQ(counted, expected_bytes) << label;

  // Values and gradients through the reduced result: partial dims are reduced first (that
  // move's backward gives each piece its derivative). Loss = sum(value * w) on one device.
  Placements reduced_placements = out.placements();
  for (auto& p : reduced_placements) {
    if (p.is_partial()) p = Placement::replicate();
  }
  DTensor reduced = out.redistribute(reduced_placements);
  double err = expect_close(reduced.to_local(), box_of(value, reduced.spec()), 1e-12, 1e-14, label);
  (reduced.to_local() * box_of(w, reduced.spec())).sum().backward();
  at::Tensor grad = w;
  if (!partial_dims.empty()) {
    const Placement& p = src[partial_dims[0]];
    if (p.reduce == comm::ReduceOp::kAvg) grad = w / combos;
    if (p.reduce == comm::ReduceOp::kMax) {
      at::Tensor count = at::zeros_like(value);
      for (const auto& piece : pieces)
        count += piece.eq(value).to(at::kDouble);
      grad = w * partial_piece(x, y, src, me).eq(value).to(at::kDouble) / count;
    }
  }
  err = std::max(err,
                 expect_close(local.grad(), box_of(grad, src_spec), 1e-12, 1e-14, label + " grad"));
  return err;
}

std::vector<std::vector<int64_t>> shapes_for(int n) {
  return {{4 * n + 1, 3}, {2, 5}, {2 * n, 4}};  // uneven, smaller than the mesh, even
}

class Redistribute1D : public ::testing::TestWithParam<int> {};

TEST_P(Redistribute1D, EveryPairOfPlacements) {
  const int n = GetParam();
  const std::vector<Placement> all = {Placement::shard(0),
                                      Placement::shard(1),
                                      Placement::replicate(),
                                      Placement::partial(),
                                      Placement::partial(comm::ReduceOp::kAvg),
                                      Placement::partial(comm::ReduceOp::kMax)};
  run_ranks(n, [&](const comm::Group& world) {
    DeviceMesh mesh(world, MeshSpec{{n}, {"tp"}});
    double worst = 0;
    int pairs = 0;
    for (const auto& shape : shapes_for(n)) {
      for (const auto& a : all) {
        for (const auto& b : all) {
          worst = std::max(worst, check_pair(mesh, shape, {a}, {b}));
          ++pairs;
        }
      }
    }
    if (world.rank() == 0)
      std::printf("tp=%d: %d redistributions, max relative error %.3g\n", n, pairs, worst);
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, Redistribute1D, ::testing::Values(2, 3, 4),
                         [](const auto& info) { return "tp" + std::to_string(info.param); });

TEST(Redistribute2D, EveryPairOnTwoByTwo) {
  const std::vector<Placement> one = {Placement::shard(0), Placement::shard(1),
                                      Placement::replicate(), Placement::partial()};
  run_ranks(4, [&](const comm::Group& world) {
    DeviceMesh mesh(world, MeshSpec::parse("dp=2,tp=2"));
    double worst = 0;
    int pairs = 0;
    for (const auto& shape : std::vector<std::vector<int64_t>>{{9, 3}, {4, 4}, {3, 1}}) {
      for (const auto& a0 : one)
        for (const auto& a1 : one)
          for (const auto& b0 : one)
            for (const auto& b1 : one) {
              worst = std::max(worst, check_pair(mesh, shape, {a0, a1}, {b0, b1}));
              ++pairs;
            }
    }
    if (world.rank() == 0)
      std::printf("2x2: %d redistributions, max relative error %.3g\n", pairs, worst);
  });
}

TEST(Redistribute, PlanOrdersForLowVolume) {
  run_ranks(4, [](const comm::Group& world) {
    DeviceMesh mesh(world, MeshSpec::parse("dp=2,tp=2"));
    auto plan = [&](const char* from, const char* to) {
      std::string s;
      for (const auto& step : plan_redistribute(DTensorSpec(mesh, parse_placements(from), {8, 8}),
                                                parse_placements(to))) {
        s += fmt::format("{}:{} ", step.mesh_dim, step.to.str());
      }
      return s;
    };
    // Reduce while small, then gather.
    EXPECT_EQ(plan("S(0),P", "R,R"), "1:R 0:R ");
    // Slice before gathering elsewhere.
    EXPECT_EQ(plan("S(0),R", "R,S(1)"), "1:S(1) 0:R ");
    // The same tensor dim moving from the outer to the inner mesh dim: gather, then slice.
    EXPECT_EQ(plan("S(0),R", "R,S(0)"), "0:R 1:S(0) ");
    // Nested sharding of one dim: unshard inner first.
    EXPECT_EQ(plan("S(0),S(0)", "R,R"), "1:R 0:R ");
    EXPECT_EQ(plan("S(0),S(0)", "R,S(0)"), "1:R 0:R 1:S(0) ");
    // Partial to shard: one reduce-scatter; S(0) -> P goes through R.
    EXPECT_EQ(plan("P,R", "S(1),R"), "0:S(1) ");
    EXPECT_EQ(plan("S(0),R", "P,R"), "0:R 0:P ");
  });
}

TEST(Redistribute, FromLocalUnevenAndDistributeAgree) {
  run_ranks(3, [](const comm::Group& world) {
    DeviceMesh mesh(world, MeshSpec{{3}, {"tp"}});
    const at::Tensor full = pattern({7, 2}, 0.3);
    DTensor d = distribute_tensor(full, mesh, {Placement::shard(0)});
    EXPECT_EQ(d.to_local().size(0), world.rank() < 2 ? 3 : 1);
    DTensor e = DTensor::from_local(d.to_local(), mesh, {Placement::shard(0)});
    EXPECT_EQ(e.shape(), (std::vector<int64_t>{7, 2}));
    EXPECT_TRUE(at::equal(e.full_tensor(), full));
    EXPECT_THROW(DTensor(d.to_local(), DTensorSpec(mesh, {Placement::shard(0)}, {12, 2})), Error);
  });
}

TEST(Placement, ParseAndPrint) {
  for (const char* text : {"S(0)", "S(-1)", "R", "P", "P(avg)", "P(max)"}) {
    EXPECT_EQ(Placement::parse(text).str(), text);
  }
  EXPECT_EQ(Placement::parse("P(sum)").str(), "P");
  EXPECT_EQ(Placement::parse("Shard(1)"), Placement::shard(1));
  EXPECT_EQ(placements_str(parse_placements("[S(0), R]")), "[S(0), R]");
  for (const char* bad : {"S", "S()", "S(x)", "Q", "P(min)", "S(1-)"}) {
    EXPECT_THROW(Placement::parse(bad), UserError) << bad;
  }
}

}  // namespace
}  // namespace vescale
