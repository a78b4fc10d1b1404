// GradientAccumulation, the schedule without a pipeline: losses in micro-batch order, the
// gradient of their mean, and the last-backward signal before the last backward.
#include "train/schedule.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "support/run_ranks.h"
#include "support/tensors.h"

namespace vescale {
namespace {

TEST(GradientAccumulation, GradientOfTheMeanLossAndLastBackwardSignal) {
  testing::run_ranks(1, [](const comm::Group& world) {
    DeviceMesh mesh(world, MeshSpec{{1}, {"tp"}});
    DTensor w(at::tensor({1.0, 2.0}, at::kDouble),
              DTensorSpec(mesh, {Placement::replicate()}, {2}));
    w.requires_grad_();
    int forwards = 0, forwards_at_signal = -1, backwards_at_signal = -1;
    // Each "batch" carries its micro-batch index; loss_m = (m + 1) * w0 + w1.
    GradientAccumulation schedule(4, [&](const Batch& batch) {
      ++forwards;
      const double m = batch.inputs.item<double>();
      at::Tensor local = w.to_local()[0] * (m + 1) + w.to_local()[1];
      return DTensor(local, DTensorSpec(mesh, {Placement::replicate()}, {}));
    });
    schedule.on_last_backward([&] {
      forwards_at_signal = forwards;
      // The gradient so far: micro-batches 0..2, each scaled by 1/4.
      backwards_at_signal = w.to_local().grad().defined()
                                ? static_cast<int>(w.to_local().grad()[0].item<double>() * 4 + 0.5)
                                : 0;
    });
    const auto losses = schedule.run([](int64_t micro) {
      return Batch{at::full({}, static_cast<double>(micro), at::kDouble), at::Tensor(), {}};
    });
    EXPECT_EQ(testing::to_vector(losses), (std::vector<double>{3, 4, 5, 6}));
    EXPECT_EQ(forwards_at_signal, 4);
    EXPECT_EQ(backwards_at_signal, 1 + 2 + 3);  // d/dw0 of micro-batches 0..2, unscaled
    // d mean / d w0 = (1 + 2 + 3 + 4) / 4, d mean / d w1 = 1.
    EXPECT_DOUBLE_EQ(w.to_local().grad()[0].item<double>(), 2.5);
    EXPECT_DOUBLE_EQ(w.to_local().grad()[1].item<double>(), 1.0);
  });
}

}  // namespace
}  // namespace vescale
