// NOTE [Non-finite steps]: the policy, and the all-ranks check before a checkpoint.
#include "train/nonfinite.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "support/run_ranks.h"

namespace vescale {
namespace {

StepResult step(double loss, double norm) {
  StepResult r;
  r.loss = loss;
  r.grad_norm = norm;
  r.updated = std::isfinite(loss) && std::isfinite(norm);
  return r;
}

TEST(NonFinite, StopEndsTheJobOnTheFirstNonFiniteStep) {
  NonFiniteGuard guard(OnNonfinite::kStop, 10);
  guard.after_step(0, step(2.5, 1.0));
  try {
    guard.after_step(6, step(std::nan(""), 3.0));
    FAIL() << "no DivergedError";
  } catch (const DivergedError& e) {
    EXPECT_NE(std::string(e.what()).find("step 7: the loss is nan"), std::string::npos) << e.what();
  }
}

TEST(NonFinite, SkipCountsAndStopsAfterMaxSkippedInARow) {
  NonFiniteGuard guard(OnNonfinite::kSkip, 3);
  const double inf = std::numeric_limits<double>::infinity();
  guard.after_step(0, step(2.0, inf));
  guard.after_step(1, step(2.0, inf));
  guard.after_step(2, step(2.0, 1.0));  // a finite step resets the run
  guard.after_step(3, step(inf, 1.0));
  guard.after_step(4, step(inf, 1.0));
  EXPECT_EQ(guard.skipped(), 4);
  EXPECT_THROW(guard.after_step(5, step(inf, 1.0)), DivergedError);
}

TEST(NonFinite, OneRanksNanMakesEveryRankRefuse) {
  testing::run_ranks(3, [](const comm::Group& world) {
    std::vector<at::Tensor> state{at::ones({4}), at::arange(3, at::kLong)};
    EXPECT_TRUE(finite_everywhere(state, world));
    if (world.rank() == 1) state[0][2] = std::numeric_limits<float>::infinity();
    EXPECT_FALSE(finite_everywhere(state, world)) << "rank " << world.rank();
  });
}

}  // namespace
}  // namespace vescale
