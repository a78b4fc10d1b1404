// Context parallelism inside the model, on threads-as-ranks (float64): with the ring open, a GPT
// (learned positions, dropout 0.1) and a Llama (rotary) run on each rank's part of the sequences
// (NOTE [Ring attention]) give that part of the whole-sequence run's logits, and their parameter
// gradients summed over the ring are the whole run's.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <mutex>

#include "dtensor/context_parallel.h"
#include "support/run_ranks.h"
#include "support/tensors.h"
#include "support/training_runs.h"
#include "train/parallel_model.h"

namespace vescale {
namespace {

/// This rank's two chunks of x along dim 1 (the sequence), concatenated.
at::Tensor my_part(const at::Tensor& x, const comm::Group& ring) {
  return sequence_part(x, 1, ring.rank(), ring.size());
}

/// The worst |difference| over ranks of logits and of ring-summed parameter gradients.
double ring_against_whole(const std::string& toml, const std::vector<std::string>& overrides,
                          int ranks) {
  std::vector<std::string> o = overrides;
  o.push_back("job.dump_folder=\"" + testing::fresh_folder("vescale-cp") + "\"");
  const JobConfig config = JobConfig::parse(toml, "context_parallel_test.toml", o);
  std::mutex mu;
  double worst = 0;
  testing::run_ranks(ranks, [&](const comm::Group& world) {
    std::vector<std::vector<int>> alone;
    for (int r = 0; r < world.size(); ++r)
      alone.push_back({r});
    const comm::Group single = world.split(alone, "single");
    ParallelModel model(config, single, JobPurpose::kTrain);
    const LayerRunner run = model.layer_runner();
    const auto layers = static_cast<int64_t>(model.task().layers().size());
    auto logits = [&](const Batch& b) {
      return run(0, layers, model.task().inputs(b, model.mesh().param_mesh()), b.context)
          .at(0)
          .to_local();
    };
    auto take_grads = [&] {
      std::vector<at::Tensor> grads;
      for (const auto& [fqn, p] : model.params()) {
        const at::Tensor g = p->to_local().grad();
        grads.push_back(g.defined() ? g.clone() : at::zeros_like(p->to_local()));
        p->zero_grad();
      }
      return grads;
    };
    const Batch batch = model.micro_batch(0, 0);
    const at::Tensor whole = logits(batch);
    // The same weights on every rank, so the loss is the same function of the logits.
    const at::Tensor weights = at::arange(whole.numel(), whole.options()).sin().view_as(whole);
    (whole * weights).sum().backward();
    const std::vector<at::Tensor> whole_grads = take_grads();

    Batch part = batch;
    part.inputs = my_part(batch.inputs, world);
    part.targets = my_part(batch.targets, world);
    part.context.cp = &world;
    const at::Tensor mine = logits(part);
    (mine * my_part(weights, world)).sum().backward();
    std::vector<at::Tensor> ring_grads = take_grads();
    double w = (mine - my_part(whole.detach(), world)).abs().max().item<double>();
    for (size_t k = 0; k < ring_grads.size(); ++k) {
      world.all_reduce(ring_grads[k]);
      w = std::max(w, (ring_grads[k] - whole_grads[k]).abs().max().item<double>());
    }
    std::lock_guard<std::mutex> lock(mu);
    worst = std::max(worst, w);
  });
  return worst;
}

TEST(ContextParallel, GptPartsMatchTheWholeSequence) {
  for (int ranks : {2, 4}) {
    const double error = ring_against_whole(testing::kGptRun, {"model.dropout=0.1"}, ranks);
    std::printf("gpt, dropout 0.1, ring of %d: worst |difference| of logits and gradients = %.3g\n",
                ranks, error);
    EXPECT_LE(error, 1e-12);
  }
}

TEST(ContextParallel, LlamaPartsMatchTheWholeSequence) {
  for (int ranks : {2, 4}) {
    const double error = ring_against_whole(testing::kLlamaRun, {}, ranks);
    std::printf("llama, ring of %d: worst |difference| of logits and gradients = %.3g\n", ranks,
                error);
    EXPECT_LE(error, 1e-12);
  }
}

}  // namespace
}  // namespace vescale
