// NOTE [One host sync]: a training step reads its device once, whatever the layout: micro-batches,
// a pipeline, data and tensor parallelism, ZeRO, bf16 master weights, clipping on or off. And the
// master weights take their float32 gradients into one buffer made at the first step: the steps
// after it allocate none for them. The update after the first steps (taking the gradients, the
// optimizer step, the copies into the parameters) reads nothing from its device and makes no
// tensor, as a captured CUDA graph needs; and a bf16 job's update runs over one flat run per
// buffer (NOTE [Adjacent runs]).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "config/job_config.h"
#include "core/host_sync.h"
#include "core/memory_meter.h"
#include "mesh/device_mesh.h"
#include "optim/adjacent_runs.h"
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

/// Host syncs and tensor allocations of the update of rank 0 of `overrides`' job after 2 steps:
/// the master weights' take_grads (when bf16), an optimizer step and the job's after_update.
std::pair<int64_t, int64_t> update_syncs_and_allocations(
    const std::vector<std::string>& overrides) {
  install_memory_meter();
  const JobConfig config = JobConfig::parse(testing::kGptRun, "train_step_test.toml", overrides);
  std::atomic<int64_t> syncs{0}, allocations{0};
  testing::run_ranks(static_cast<int>(config.world_size()), [&](const comm::Group& world) {
    auto job = build_job(config, world);
    const auto update = [&] {
      if (job->master) job->master->take_grads();
      job->optimizer->step(1e-3);
      job->after_update();
    };
    for (int64_t s = 0; s < 2; ++s) {
      job->train_step->run([&](int64_t micro) { return job->model->micro_batch(s, micro); }, 1e-3);
      update();  // the warm-up: the scratch buffers are made once
    }
    world.barrier();
    if (world.rank() == 0) {
      const int64_t syncs_before = host_syncs();
      const int64_t allocations_before = metered_tensor_allocations();
      update();
      syncs = host_syncs() - syncs_before;
      allocations = metered_tensor_allocations() - allocations_before;
    } else {
      update();
    }
    world.barrier();
  });
  std::printf("update after warm-up: %lld host syncs, %lld tensors made\n",
              static_cast<long long>(syncs.load()), static_cast<long long>(allocations.load()));
  return {syncs, allocations};
}

TEST(TrainStep, UpdatesWithoutHostSyncsOrNewTensorsAfterWarmUp) {
  const std::pair<int64_t, int64_t> none{0, 0};
  EXPECT_EQ(update_syncs_and_allocations({}), none);
  EXPECT_EQ(update_syncs_and_allocations({"training.dtype=\"bfloat16\""}), none);
  EXPECT_EQ(update_syncs_and_allocations({"training.dtype=\"bfloat16\"", "parallel.dp=2",
                                          "parallel.tp=2", "parallel.plan=\"gpt/megatron-sp\""}),
            none);
  // Not yet: ZeRO's all-gather of the updated rows makes its buffers at each step.
}

TEST(TrainStep, BF16UpdateRunsOverOneRunPerBuffer) {
  const JobConfig config =
      JobConfig::parse(testing::kGptRun, "train_step_test.toml", {"training.dtype=\"bfloat16\""});
  testing::run_ranks(1, [&](const comm::Group& world) {
    auto job = build_job(config, world);
    job->train_step->run([&](int64_t micro) { return job->model->micro_batch(0, micro); }, 1e-3);
    job->master->take_grads();
    const auto& views = job->optimizer->views();
    const auto states = job->optimizer->state_tensors();  // exp_avg, exp_avg_sq per view
    std::vector<std::vector<at::Tensor>> update(4), copy(2);
    for (size_t k = 0; k < views.size(); ++k) {
      update[0].push_back(views[k].value());
      update[1].push_back(views[k].grad());
      update[2].push_back(states[2 * k].local.view({-1}));
      update[3].push_back(states[2 * k + 1].local.view({-1}));
      copy[0].push_back(job->model->params()[k].second->to_local().view({-1}));
      copy[1].push_back(views[k].value());
    }
    ASSERT_GT(views.size(), 10u);
    // AdamW steps the weights with decay and the rest apart: one run each, adjacent.
    EXPECT_EQ(merge_adjacent(update).front().size(), 1u);
    EXPECT_EQ(merge_adjacent(copy).front().size(), 1u);
  });
}

}  // namespace
}  // namespace vescale
