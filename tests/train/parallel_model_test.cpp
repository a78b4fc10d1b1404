// ParallelModel on threads-as-ranks: a model built for evaluation stands alone (no optimizer,
// no float32 copies), computes the loss the training job's model computes (ZeRO-3 gathering
// included), and says where each parameter's state lives once the training job moved it.
#include <ATen/ATen.h>
#include <c10/util/accumulate.h>
#include <gtest/gtest.h>

#include <cmath>
#include <mutex>

#include "support/run_ranks.h"
#include "support/training_runs.h"
#include "train/job.h"
#include "train/parallel_model.h"

namespace vescale {
namespace {

JobConfig config_of(std::vector<std::string> overrides) {
  overrides.push_back("job.dump_folder=\"" + testing::fresh_folder("vescale-pmodel") + "\"");
  return JobConfig::parse(testing::kGptRun, "parallel_model_test.toml", overrides);
}

TEST(ParallelModel, EvaluationModelMatchesTheTrainingJobsForwardUnderZero3AndPipeline) {
  for (const std::vector<std::string>& layout :
       {std::vector<std::string>{"parallel.dp=2", "parallel.zero=3"},
        std::vector<std::string>{"parallel.pp=2", "parallel.microbatches=2"}}) {
    const JobConfig config = config_of(layout);
    std::mutex mu;
    double worst = 0;
    testing::run_ranks(static_cast<int>(config.world_size()), [&](const comm::Group& world) {
      auto job = build_job(config, world);
      ParallelModel alone(config, world, JobPurpose::kEvaluate);
      EXPECT_EQ(job->model->forward_collective_over_dp(), config.zero == 3);
      EXPECT_FALSE(alone.forward_collective_over_dp());
      for (int64_t w = 0; w < 2; ++w) {
        const Batch batch = alone.task().val_batch(w);
        const double trained = job->model->forward_loss(batch);
        const double evaluated = alone.forward_loss(batch);
        std::lock_guard<std::mutex> lock(mu);
        worst = std::max(worst, std::abs(trained - evaluated));
      }
    });
    std::printf("%s %s: |training job's loss - evaluation model's| = %.3g\n", layout[0].c_str(),
                layout[1].c_str(), worst);
    EXPECT_EQ(worst, 0.0);  // the same initialisation and the same ops: bitwise
  }
}

TEST(ParallelModel, StateLivesInTheShardTheRowsOrTheMasterCopy) {
  const JobConfig bf16 =
      config_of({"parallel.dp=2", "parallel.zero=3", "training.dtype=\"bfloat16\""});
  testing::run_ranks(2, [&](const comm::Group& world) {
    // Evaluation: bf16 parameters are the state, whole on this rank, no float32 copies kept.
    ParallelModel alone(bf16, world, JobPurpose::kEvaluate);
    EXPECT_TRUE(alone.take_float32_init().empty());
    for (size_t k = 0; k < alone.params().size(); ++k) {
      const ParameterState s = alone.state(k);
      EXPECT_EQ(s.local.scalar_type(), at::kBFloat16);
      EXPECT_EQ(s.local.sizes().vec(), alone.params()[k].second->to_local().sizes().vec());
    }
    // Training under ZeRO-3: the float32 master copy of this rank's rows.
    auto job = build_job(bf16, world);
    int64_t rows = 0, whole = 0;
    for (size_t k = 0; k < job->model->params().size(); ++k) {
      const ParameterState s = job->model->state(k);
      EXPECT_EQ(s.local.scalar_type(), at::kFloat);
      EXPECT_EQ(s.local.data_ptr(), job->master->views()[k].flat.data_ptr());
      EXPECT_EQ(s.spec.local_offset(), job->zero->piece_spec(k).local_offset());
      EXPECT_EQ(s.spec.local_shape(), job->zero->piece_spec(k).local_shape());
      rows += s.local.numel();
      whole += c10::multiply_integers(job->model->params()[k].second->spec().local_shape());
    }
    EXPECT_LT(rows, whole);  // rows, not whole parameters
  });
}

}  // namespace
}  // namespace vescale
