#include "parallel/data_parallel.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "dmodule/parallelize.h"
#include "dtensor/ops.h"
#include "models/mlp.h"
#include "support/expect_close.h"
#include "support/run_ranks.h"

namespace vescale {
namespace {

using testing::run_ranks;

TEST(DataParallel, BucketsLaunchDuringBackwardAndAverage) {
  // Two dp ranks see different data; their averaged gradients equal the gradient of the mean loss.
  auto data = [](int rank) {
    return (at::arange(8 * 6, at::kDouble).view({8, 6}) * 0.37 + rank).sin();
  };
  std::map<std::string, at::Tensor> reference;
  {
    run_ranks(1, [&](const comm::Group& world) {
      DeviceMesh mesh(world, MeshSpec{{1}, {"tp"}});
      auto model = std::make_shared<models::MLP>(models::MLPConfig{6, 16, 3, 3});
      ParallelizeOptions options;
      options.dtype = at::kDouble;
      auto pm = parallelize_module(model, mesh, replicate_plan("mlp"), options);
      const Placements r{Placement::replicate()};
      DTensor a = ops::mean(pm->module()(distribute_tensor(data(0), mesh, r)));
      DTensor b = ops::mean(pm->module()(distribute_tensor(data(1), mesh, r)));
      ((a.to_local() + b.to_local()) / 2).backward();
      for (auto& [fqn, p] : pm->parameters())
        reference[fqn] = p->get().to_local().grad().clone();
    });
  }
  run_ranks(2, [&](const comm::Group& world) {
    DeviceMesh mesh(world, MeshSpec::parse("dp=2,tp=1"));
    DeviceMesh tp = mesh["tp"];
    auto model = std::make_shared<models::MLP>(models::MLPConfig{6, 16, 3, 3});
    ParallelizeOptions options;
    options.dtype = at::kDouble;
    auto pm = parallelize_module(model, tp, replicate_plan("mlp"), options);
    std::vector<DTensor*> params;
    for (auto& [fqn, p] : pm->parameters())
      params.push_back(&p->get());
    DataParallel dp(params, mesh.group("dp"), /*bucket_bytes=*/256);
    EXPECT_GE(dp.buckets(), 3);
    dp.arm();
    ops::mean(pm->module()(distribute_tensor(data(world.rank()), tp, {Placement::replicate()})))
        .to_local()
        .backward();
    const int overlapped = dp.finish();
    EXPECT_GE(overlapped, 1) << "no bucket was launched during backward";
    if (world.rank() == 0)
      std::printf("%d of %d buckets launched during backward\n", overlapped, dp.buckets());
    for (auto& [fqn, p] : pm->parameters()) {
      testing::expect_close(p->get().to_local().grad(), reference.at(fqn), 1e-13, 1e-15, fqn);
    }
  });
}

}  // namespace
}  // namespace vescale
