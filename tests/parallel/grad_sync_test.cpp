// GradSync, the one bucketer: the data-parallel average launched from hooks during backward,
// Partial (sequence-parallel) gradients summed over tp, both at once, and micro-batches.
#include "parallel/grad_sync.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdio>

#include "dmodule/parallelize.h"
#include "dtensor/ops.h"
#include "models/mlp.h"
#include "support/expect_close.h"
#include "support/run_ranks.h"
#include "support/tensors.h"
#include "train/schedule.h"

namespace vescale {
namespace {

using testing::run_ranks;

at::Tensor sample(int rank) {
  return (at::arange(8 * 6, at::kDouble).view({8, 6}) * 0.37 + rank).sin();
}

std::unique_ptr<ParallelizedModule> mlp_on(const DeviceMesh& mesh) {
  auto model = std::make_shared<models::MLP>(models::MLPConfig{6, 16, 3, 3});
  ParallelizeOptions options;
  options.dtype = at::kDouble;
  return parallelize_module(model, mesh, replicate_plan("mlp"), options);
}

std::vector<DTensor*> params_of(ParallelizedModule& pm) {
  std::vector<DTensor*> params;
  for (auto& [fqn, p] : pm.parameters())
    params.push_back(&p->get());
  return params;
}

/// Gradients of the mean of the losses on samples 0..n-1, on one rank.
std::map<std::string, at::Tensor> reference_grads(int n) {
  std::map<std::string, at::Tensor> reference;
  run_ranks(1, [&](const comm::Group& world) {
    DeviceMesh mesh(world, MeshSpec{{1}, {"tp"}});
    auto pm = mlp_on(mesh);
    at::Tensor total;
    for (int r = 0; r < n; ++r) {
      at::Tensor l =
          ops::mean(pm->module()(distribute_tensor(sample(r), mesh, {Placement::replicate()})))
              .to_local();
      total = r == 0 ? l : total + l;
    }
    (total / n).backward();
    for (auto& [fqn, p] : pm->parameters())
      reference[fqn] = p->get().to_local().grad().clone();
  });
  return reference;
}

TEST(GradSync, DataParallelBucketsLaunchDuringBackwardAndAverage) {
  // Two dp ranks see different data; their averaged gradients equal the gradient of the mean loss.
  const auto reference = reference_grads(2);
  run_ranks(2, [&](const comm::Group& world) {
    DeviceMesh mesh(world, MeshSpec::parse("dp=2,tp=1"));
    DeviceMesh tp = mesh["tp"];
    auto pm = mlp_on(tp);
    GradSync sync(params_of(*pm), mesh.group("dp"), /*bucket_bytes=*/256);
    sync.start_last_backward();
    EXPECT_GE(sync.buckets(), 3);
    const int64_t before = world.stats().bytes("dp");
    ops::mean(pm->module()(distribute_tensor(sample(world.rank()), tp, {Placement::replicate()})))
        .to_local()
        .backward();
    const int overlapped = sync.finish();
    EXPECT_GE(overlapped, 1) << "no bucket was launched during backward";
    // One all-reduce of every gradient over 2 ranks: 2 (n-1)/n x bytes = the bytes.
    int64_t grad_bytes = 0;
    for (DTensor* p : params_of(*pm))
      grad_bytes += static_cast<int64_t>(p->to_local().nbytes());
    EXPECT_EQ(world.stats().bytes("dp") - before, grad_bytes);
    if (world.rank() == 0)
      std::printf("%d of %d buckets launched during backward, %lld dp bytes\n", overlapped,
                  sync.buckets(), static_cast<long long>(grad_bytes));
    for (auto& [fqn, p] : pm->parameters()) {
      testing::expect_close(p->get().to_local().grad(), reference.at(fqn), 1e-13, 1e-15, fqn);
    }
  });
}

TEST(GradSync, AccumulatesMicroBatchesThroughTheSchedule) {
  // One dp rank with 2 micro-batches and another with 2: the mean over all 4 samples.
  const auto reference = reference_grads(4);
  run_ranks(2, [&](const comm::Group& world) {
    DeviceMesh mesh(world, MeshSpec::parse("dp=2,tp=1"));
    DeviceMesh tp = mesh["tp"];
    auto pm = mlp_on(tp);
    GradSync sync(params_of(*pm), mesh.group("dp"), /*bucket_bytes=*/256);
    GradientAccumulation schedule(2, [&](const Batch& batch) {
      return ops::mean(pm->module()(distribute_tensor(batch.inputs, tp, {Placement::replicate()})));
    });
    int notified = 0;
    schedule.on_last_backward([&] {
      ++notified;
      sync.start_last_backward();
    });
    sync.zero_grad();
    const auto losses = schedule.run([&](int64_t micro) {
      return Batch{sample(world.rank() * 2 + static_cast<int>(micro)), at::Tensor(), {}};
    });
    EXPECT_EQ(losses.numel(), 2);
    EXPECT_EQ(notified, 1);
    EXPECT_GE(sync.finish(), 1);
    for (auto& [fqn, p] : pm->parameters()) {
      testing::expect_close(p->get().to_local().grad(), reference.at(fqn), 1e-13, 1e-15, fqn);
    }
  });
}

TEST(GradSync, PartialGradientsAreSummedOverTpAndAveragedOverDp) {
  // A LayerNorm under sequence parallel (sequence sharded over tp, weight Replicate): its weight
  // gradient is Partial over tp. On dp=2 x tp=2 grad sync averages over dp and sums over tp.
  using testing::box_of;
  using testing::pattern;
  at::Tensor x = pattern({2, 4, 4}, 0.1);
  at::Tensor w = (pattern({4}, 0.2) + 1).requires_grad_(true);
  at::Tensor b = pattern({4}, 0.3).requires_grad_(true);
  at::Tensor weights = pattern({2, 4, 4}, 0.4);
  // The reference: the mean over the two dp ranks' losses (dp rank r scales its loss by r + 1).
  const at::Tensor ref = at::layer_norm(x, {4}, w, b, 1e-5);
  ((ref * weights).sum() * 1.5).backward();
  run_ranks(4, [&](const comm::Group& world) {
    DeviceMesh mesh(world, MeshSpec::parse("dp=2,tp=2"));
    DeviceMesh tp = mesh["tp"];
    const int64_t dp_rank = mesh.coordinate()[0];
    DTensor dx = distribute_tensor(x, tp, {Placement::shard(1)});
    DTensor dw(w.detach().clone(), DTensorSpec(tp, {Placement::replicate()}, {4}));
    DTensor db(b.detach().clone(), DTensorSpec(tp, {Placement::replicate()}, {4}));
    dw.requires_grad_();
    db.requires_grad_();
    GradSync sync({&dw, &db}, mesh.group("dp"), 1 << 20);
    DTensor y = ops::layer_norm(dx, dw, db, 1e-5);
    sync.start_last_backward();
    EXPECT_EQ(dw.partial_grad_dims(), std::vector<int>{0});
    const int64_t tp_before = world.stats().bytes("tp"), dp_before = world.stats().bytes("dp");
    ((y.to_local() * box_of(weights, y.spec())).sum() * static_cast<double>(dp_rank + 1))
        .backward();
    sync.finish();
    // One bucket (dw and db: 8 doubles), all-reduced once over each dim of 2 ranks:
    // 2 (n-1)/n x 64 bytes = 64 bytes on each.
    EXPECT_EQ(world.stats().bytes("tp") - tp_before, 64);
    EXPECT_EQ(world.stats().bytes("dp") - dp_before, 64);
    EXPECT_TRUE(dw.partial_grad_dims().empty());
    EXPECT_EQ(placements_str(dw.grad().placements()), "[R]");
    testing::expect_close(dw.to_local().grad(), w.grad(), 1e-12, 1e-13, "LayerNorm weight grad");
    testing::expect_close(db.to_local().grad(), b.grad(), 1e-12, 1e-13, "LayerNorm bias grad");
  });
}

}  // namespace
}  // namespace vescale
