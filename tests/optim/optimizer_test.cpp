// Optimizers over flat views: a parameter updated as two half views equals it updated whole,
// bit for bit, and the state reports each view's global place. The explicit AdamW update of
// tensors merged into one run (NOTE [Adjacent runs]) and worked through chunk by chunk equals it
// tensor by tensor, bit for bit.
#include "optim/adamw.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/adamw_update.h"
#include "kernels/kernel_table.h"
#include "optim/adjacent_runs.h"
#include "optim/sgd.h"
#include "support/run_ranks.h"
#include "support/tensors.h"

namespace vescale {
namespace {

using testing::pattern;
using testing::run_ranks;

/// A [6, 4] parameter on a 1-rank mesh with a fixed gradient.
DTensor make_param(const DeviceMesh& mesh) {
  DTensor p(pattern({6, 4}, 0.1).clone(), DTensorSpec(mesh, {Placement::replicate()}, {6, 4}));
  p.requires_grad_();
  p.to_local().mutable_grad() = pattern({6, 4}, 0.7);
  return p;
}

template <typename Opt, typename Options>
void check_halves_equal_whole(const Options& options) {
  run_ranks(1, [&](const comm::Group& world) {
    DeviceMesh mesh(world, MeshSpec{{1}, {"tp"}});
    DTensor whole = make_param(mesh), halves = make_param(mesh);
    Opt a({ParamView::whole("w", &whole, whole.spec())}, options);
    // Rows 0-2 and 3-5: flat ranges [0, 12) and [12, 24), each the box that rank 0 or 1 of a
    // 2-way split on dim 0 would hold (as a dp-split ZeRO piece is described).
    const auto half = [&](int piece) {
      return DTensorSpec(DeviceMesh::layout(MeshSpec{{2}, {"dp"}}, piece), {Placement::shard(0)},
                         {6, 4});
    };
    const ParamView top = ParamView::range("w", &halves, 0, 12, half(0));
    const ParamView bottom = ParamView::range("w", &halves, 12, 12, half(1));
    Opt b({top, bottom}, options);
    for (int step = 0; step < 3; ++step) {
      a.step(0.1);
      b.step(0.1);
    }
    EXPECT_TRUE(at::equal(whole.to_local(), halves.to_local()));
    const auto state_a = a.state_tensors(), state_b = b.state_tensors();
    ASSERT_EQ(state_b.size(), 2 * state_a.size());
    EXPECT_EQ(state_b[state_a.size()].spec.local_offset(), (std::vector<int64_t>{3, 0}));
    EXPECT_EQ(state_b[state_a.size()].local.sizes().vec(), (std::vector<int64_t>{3, 4}));
    // The halves' states, in order, are the whole's state.
    for (size_t s = 0; s < state_a.size(); ++s) {
      const at::Tensor joined = at::cat(
          {state_b[s].local.reshape({-1}), state_b[state_a.size() + s].local.reshape({-1})});
      EXPECT_TRUE(at::equal(joined, state_a[s].local.reshape({-1}))) << state_a[s].state;
    }
  });
}

TEST(Optimizer, AdamWOnTwoFlatViewsEqualsWholeBitwise) {
  check_halves_equal_whole<AdamW>(AdamWOptions{0.1, 0.9, 0.95, 1e-8, 0.1});
}

TEST(Optimizer, SGDOnTwoFlatViewsEqualsWholeBitwise) {
  check_halves_equal_whole<SGD>(SGDOptions{0.9, 0.01});
}

TEST(Optimizer, AdamWOffCudaIsTheExplicitUpdateBitwise) {
  // NOTE [Kernel table]: on the CPU, and in float64 anywhere, AdamW keeps the explicit update.
  ASSERT_EQ(kernels::choose(kernels::kAdamWPaths, {kCpu, at::kFloat}).id,
            kernels::AdamWPathId::kForeach);
  const double lr = 0.1, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, decay = 0.1;
  run_ranks(1, [&](const comm::Group& world) {
    DeviceMesh mesh(world, MeshSpec{{1}, {"tp"}});
    for (at::ScalarType dtype : {at::kFloat, at::kDouble}) {
      const at::Tensor g = pattern({6, 4}, 0.7).to(dtype);
      DTensor p(pattern({6, 4}, 0.1).to(dtype),
                DTensorSpec(mesh, {Placement::replicate()}, {6, 4}));
      p.requires_grad_();
      p.to_local().mutable_grad() = g;
      AdamW opt({ParamView::whole("w", &p, p.spec())}, AdamWOptions{lr, beta1, beta2, eps, decay});
      at::Tensor w = pattern({6, 4}, 0.1).to(dtype), m = at::zeros_like(w), v = at::zeros_like(w);
      for (int step = 1; step <= 3; ++step) {
        opt.step(lr);
        const double bias1 = 1.0 - std::pow(beta1, static_cast<double>(step));
        const double bias2 = 1.0 - std::pow(beta2, static_cast<double>(step));
        w.mul_(1.0 - lr * decay);
        m.mul_(beta1).add_(g, 1.0 - beta1);
        v.mul_(beta2).addcmul_(g, g, 1.0 - beta2);
        w.addcdiv_(m, (v.sqrt() / std::sqrt(bias2)).add_(eps), -lr / bias1);
      }
      EXPECT_TRUE(at::equal(p.to_local().detach(), w)) << dtype;
    }
  });
}

TEST(Optimizer, StateTensorsCarryTheViewsGlobalPlace) {
  // dp=1 x tp=2: the [6, 4] parameter sharded S(0) over tp; on the job mesh its state is the
  // same box, with placements [R, S(0)].
  run_ranks(2, [&](const comm::Group& world) {
    DeviceMesh mesh(world, MeshSpec::parse("dp=1,tp=2"));
    DeviceMesh tp = mesh["tp"];
    DTensor p = distribute_tensor(pattern({6, 4}, 0.1), tp, {Placement::shard(0)});
    p = DTensor(p.to_local().clone(), p.spec());
    p.requires_grad_();
    AdamW opt({ParamView::whole("w", &p, p.spec().on_mesh(mesh))}, AdamWOptions{});
    const auto states = opt.state_tensors();
    ASSERT_EQ(states.size(), 2u);
    EXPECT_EQ(states[0].state, "exp_avg");
    EXPECT_EQ(placements_str(states[0].spec.placements), "[R, S(0)]");
    EXPECT_EQ(states[0].spec.local_offset(), (std::vector<int64_t>{3 * world.rank(), 0}));
    EXPECT_EQ(states[0].local.sizes().vec(), (std::vector<int64_t>{3, 4}));
    EXPECT_TRUE(at::equal(states[0].local, at::zeros({3, 4}, at::kDouble)));
  });
}

TEST(AdjacentRuns, MergeTensorsThatLieEndToEndInEveryList) {
  const at::Tensor a = at::arange(10, at::kFloat), b = at::arange(10, at::kFloat);
  // Out of order, with a gap (a[5, 7)) and a tensor of another storage.
  const at::Tensor other = at::ones({3});
  const auto merged =
      merge_adjacent({{a.narrow(0, 3, 2), a.narrow(0, 0, 3), other, a.narrow(0, 7, 3)},
                      {b.narrow(0, 3, 2), b.narrow(0, 0, 3), other.clone(), b.narrow(0, 7, 3)}});
  ASSERT_EQ(merged.size(), 2u);
  std::vector<std::vector<int64_t>> sizes;
  for (const at::Tensor& t : merged[0])
    sizes.push_back({t.storage_offset(), t.numel()});
  // a's runs [0, 5) and [7, 10), and `other`, each once (their order follows the storages).
  EXPECT_EQ(sizes.size(), 3u);
  EXPECT_NE(std::find(sizes.begin(), sizes.end(), std::vector<int64_t>{0, 5}), sizes.end());
  EXPECT_NE(std::find(sizes.begin(), sizes.end(), std::vector<int64_t>{7, 3}), sizes.end());
  for (size_t i = 0; i < merged[0].size(); ++i)
    EXPECT_TRUE(at::equal(merged[0][i], merged[1][i]));
  // Adjacent in one list only: nothing merges.
  const auto apart = merge_adjacent(
      {{a.narrow(0, 0, 3), a.narrow(0, 3, 2)}, {b.narrow(0, 5, 3), b.narrow(0, 0, 2)}});
  EXPECT_EQ(apart.front().size(), 2u);
}

TEST(Optimizer, ExplicitAdamWMergedAndChunkedEqualsTensorByTensorBitwise) {
  // Sizes around the vector widths and the chunk, so that elements change between a kernel's
  // vectorised body and its scalar tail.
  const std::vector<int64_t> sizes{1, 7, 9, 33, 100, 257, 1031};
  const AdamWHyper hyper{0.01, 0.9, 0.95, 1e-8, 0.1, 3};
  for (at::ScalarType dtype : {at::kFloat, at::kDouble}) {
    int64_t total = 0;
    for (int64_t n : sizes)
      total += n;
    at::manual_seed(7);
    const at::Tensor p = at::randn({total}, dtype), g = at::randn({total}, dtype),
                     m = at::randn({total}, dtype), v = at::rand({total}, dtype);
    const auto split = [&](const at::Tensor& flat) {
      std::vector<at::Tensor> pieces;
      int64_t offset = 0;
      for (int64_t n : sizes) {
        pieces.push_back(flat.narrow(0, offset, n));
        offset += n;
      }
      return pieces;
    };
    AdamWLists each{split(p.clone()), split(g), split(m.clone()), split(v.clone()), {}};
    const at::Tensor p2 = p.clone(), m2 = m.clone(), v2 = v.clone();
    auto runs = merge_adjacent({split(p2), split(g), split(m2), split(v2)});
    ASSERT_EQ(runs.front().size(), 1u);
    AdamWLists merged{runs[0], runs[1], runs[2], runs[3], at::empty({64}, dtype)};
    for (int step = 0; step < 3; ++step) {
      local::adamw_step(each, hyper);
      local::adamw_step(merged, hyper);
    }
    EXPECT_TRUE(at::equal(at::cat(each.params), p2)) << dtype;
    EXPECT_TRUE(at::equal(at::cat(each.exp_avg_sqs), v2)) << dtype;
    EXPECT_FALSE(at::equal(p2, p));
  }
}

}  // namespace
}  // namespace vescale
