#include "core/thread_budget.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

namespace vescale {
namespace {

TEST(ThreadBudget, OneIntraOpThreadAndTheRanksShareOfTheCoresForBlas) {
  // NOTE [Thread budget]: the measured-fastest split on a 2-core machine.
  ThreadBudget one = choose_thread_budget(2, 1, nullptr, nullptr);
  EXPECT_EQ(one.intra_op, 1);
  EXPECT_EQ(one.blas, 2);
  ThreadBudget two = choose_thread_budget(2, 2, nullptr, nullptr);
  EXPECT_EQ(two.blas, 1);
  ThreadBudget crowded = choose_thread_budget(2, 4, nullptr, nullptr);
  EXPECT_EQ(crowded.blas, 1);  // never 0
  EXPECT_EQ(choose_thread_budget(64, 8, nullptr, nullptr).blas, 8);
}

TEST(ThreadBudget, EnvironmentOverridesAndBadValuesAreIgnored) {
  ThreadBudget b = choose_thread_budget(2, 1, "2", "1");
  EXPECT_EQ(b.intra_op, 2);
  EXPECT_EQ(b.blas, 1);
  EXPECT_NE(b.origin.find("OMP_NUM_THREADS"), std::string::npos);
  EXPECT_NE(b.origin.find("OPENBLAS_NUM_THREADS"), std::string::npos);
  for (const char* bad : {"", "0", "-3", "two", "4x"}) {
    ThreadBudget d = choose_thread_budget(2, 1, bad, bad);
    EXPECT_EQ(d.intra_op, 1) << bad;
    EXPECT_EQ(d.blas, 2) << bad;
  }
}

TEST(ThreadBudget, ApplySetsTheIntraOpPoolAndSaysWhatItDid) {
  const int before = at::get_num_threads();
  const std::string line = apply_thread_budget(choose_thread_budget(2, 1, "1", nullptr));
  EXPECT_EQ(at::get_num_threads(), 1);
  EXPECT_NE(line.find("1 intra-op"), std::string::npos) << line;
  at::set_num_threads(before);
}

}  // namespace
}  // namespace vescale
