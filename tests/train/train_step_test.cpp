// NOTE [One host sync]: a training step reads its device once, whatever the layout: micro-batches,
// a pipeline, data and tensor parallelism, ZeRO, bf16 master weights, clipping on or off. And the
// master weights take their float32 gradients into one buffer made at the first step: the steps
// after it allocate none for them.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <vector>

#include "config/job_config.h"
#include "core/host_sync.h"
#include "core/memory_meter.h"
#include "mesh/device_mesh.h"
#include "optim/master_weights.h"
#include "support/run_ranks.h"
#include "support/training_runs.h"
#include "train/job.h"

namespace vescale {
namespace {

constexpr int64_t kSteps = 3;

/// Host syncs per rank per step of `kSteps` steps under `overrides`.
double host_syncs_per_step(const std::vector<std::string>& overrides) {
  const JobConfig config = JobConfig::parse(testing::kGptRun, "train_step_test.toml", overrides);
  const int world_size = static_cast<int>(config.world_size());
  std::atomic<int64_t> syncs{0}, before{0};
  testing::run_ranks(world_size, [&](const comm::Group& world) {
    auto job = build_job(config, world);
    // Ranks are threads of this process: count the steps' syncs of all of them.
    world.barrier();
    if (world.rank() == 0) before = host_syncs();
    world.barrier();
    for (int64_t s = 0; s < kSteps; ++s)
      job->train_step->run([&](int64_t micro) { return job->model->micro_batch(s, micro); }, 1e-3);
    world.barrier();
    if (world.rank() == 0) syncs = host_syncs() - before;
  });
  const double per_step = static_cast<double>(syncs) / (kSteps * world_size);
  std::printf("%d ranks: %.2f host syncs per rank per step\n", world_size, per_step);
  return per_step;
}

TEST(TrainStep, ReadsItsDeviceOncePerStep) {
  EXPECT_EQ(host_syncs_per_step({}), 1.0);
  EXPECT_EQ(host_syncs_per_step({"training.dtype=\"bfloat16\"", "training.grad_clip=0.01"}), 1.0);
  EXPECT_EQ(host_syncs_per_step({"parallel.pp=2", "parallel.dp=2"}), 1.0);
  EXPECT_EQ(host_syncs_per_step({"parallel.tp=2", "parallel.plan=\"gpt/megatron-sp\"",
                                 "parallel.dp=2", "parallel.zero=2"}),
            1.0);
}

TEST(MasterWeights, TakeTheirGradientsWithoutAllocatingAfterTheFirstStep) {
  install_memory_meter();
  testing::run_ranks(1, [](const comm::Group& world) {
    const DeviceMesh mesh(world, MeshSpec{{1}, {"tp"}});
    std::vector<DTensor> params;
    std::vector<at::Tensor> grads;
    for (int64_t n : {300, 17, 1000})
      params.emplace_back(at::randn({n}).to(at::kBFloat16),
                          DTensorSpec(mesh, {Placement::replicate()}, {n}));
    std::vector<ParamView> views;
    for (DTensor& p : params) {
      grads.push_back(at::randn({p.size(0)}).to(at::kBFloat16));
      views.push_back(ParamView::whole("p", &p, p.spec()));
      views.back().flat_grad = [g = grads.back()] { return g; };
    }
    MasterWeights master(views, [](const ParamView& v) { return v.flat.to(at::kFloat); });
    master.take_grads();
    EXPECT_EQ(master.grad_bytes(), (300 + 17 + 1000) * 4);
    for (size_t k = 0; k < grads.size(); ++k) {
      grads[k].mul_(2);
      EXPECT_TRUE(master.views()[k].grad().equal(grads[k].to(at::kFloat) / 2));
    }
    const int64_t live = metered_live_bytes();
    reset_metered_peak();
    master.take_grads();
    EXPECT_EQ(metered_peak_bytes(), live);
    for (size_t k = 0; k < grads.size(); ++k)
      EXPECT_TRUE(master.views()[k].grad().equal(grads[k].to(at::kFloat)));
  });
}

}  // namespace
}  // namespace vescale
