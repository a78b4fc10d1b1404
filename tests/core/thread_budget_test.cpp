#include "core/thread_budget.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include "core/blas_core.h"

namespace vescale {
namespace {

TEST(ThreadBudget, OneIntraOpThreadAndTheRanksShareOfTheCoresForBlas) {
  // NOTE [Thread budget]: the measured-fastest split on a 2-core machine.
  ThreadBudget one = choose_thread_budget(2, 1, nullptr, nullptr, BlasPool::kOwn);
  EXPECT_EQ(one.intra_op, 1);
  EXPECT_EQ(one.blas, 2);
  ThreadBudget two = choose_thread_budget(2, 2, nullptr, nullptr, BlasPool::kOwn);
  EXPECT_EQ(two.blas, 1);
  ThreadBudget crowded = choose_thread_budget(2, 4, nullptr, nullptr, BlasPool::kOwn);
  EXPECT_EQ(crowded.blas, 1);  // never 0
  EXPECT_EQ(choose_thread_budget(64, 8, nullptr, nullptr, BlasPool::kOwn).blas, 8);
  // The MFU's peak counts the machine's cores over its ranks, a fraction where they share one,
  // and not the threads a user set (NOTE [MFU peak]).
  EXPECT_DOUBLE_EQ(one.core_share, 2.0);
  EXPECT_DOUBLE_EQ(crowded.core_share, 0.5);
  EXPECT_DOUBLE_EQ(choose_thread_budget(2, 1, "1", "1", BlasPool::kOwn).core_share, 2.0);
}

TEST(ThreadBudget, ABlasOnAtensThreadsGetsTheRanksCoresAsIntraOpThreads) {
  // NOTE [Thread budget]: MKL (the wheel's LibTorch) runs its matmuls on ATen's threads.
  EXPECT_EQ(choose_thread_budget(2, 1, nullptr, nullptr, BlasPool::kAtens).intra_op, 2);
  EXPECT_EQ(choose_thread_budget(2, 2, nullptr, nullptr, BlasPool::kAtens).intra_op, 1);
  EXPECT_EQ(choose_thread_budget(2, 4, nullptr, nullptr, BlasPool::kAtens).intra_op, 1);
  EXPECT_EQ(choose_thread_budget(64, 8, nullptr, nullptr, BlasPool::kAtens).intra_op, 8);
  EXPECT_EQ(choose_thread_budget(64, 8, "3", nullptr, BlasPool::kAtens).intra_op, 3);
  // OpenBLAS (Debian's LibTorch) has a pool of its own; the wheel's MKL has not.
  EXPECT_EQ(blas_pool() == BlasPool::kOwn, !blas::openblas_core().empty());
}

TEST(ThreadBudget, OneThreadHoldsBothPoolsAtOneAndGivesThemBack) {
  apply_thread_budget(choose_thread_budget(4, 1, "2", "2", BlasPool::kOwn));
  EXPECT_DOUBLE_EQ(rank_core_share(), 4.0);
  {
    const OneThread one;
    EXPECT_EQ(at::get_num_threads(), 1);
  }
  EXPECT_EQ(at::get_num_threads(), 2);
  apply_thread_budget(choose_thread_budget(2, 4, "1", nullptr, BlasPool::kOwn));
  EXPECT_DOUBLE_EQ(rank_core_share(), 0.5);
}

TEST(ThreadBudget, EnvironmentOverridesAndBadValuesAreIgnored) {
  ThreadBudget b = choose_thread_budget(2, 1, "2", "1", BlasPool::kOwn);
  EXPECT_EQ(b.intra_op, 2);
  EXPECT_EQ(b.blas, 1);
  EXPECT_NE(b.origin.find("OMP_NUM_THREADS"), std::string::npos);
  EXPECT_NE(b.origin.find("OPENBLAS_NUM_THREADS"), std::string::npos);
  for (const char* bad : {"", "0", "-3", "two", "4x"}) {
    ThreadBudget d = choose_thread_budget(2, 1, bad, bad, BlasPool::kOwn);
    EXPECT_EQ(d.intra_op, 1) << bad;
    EXPECT_EQ(d.blas, 2) << bad;
  }
}

TEST(ThreadBudget, ApplySetsTheIntraOpPoolAndSaysWhatItDid) {
  const int before = at::get_num_threads();
  const std::string line =
      apply_thread_budget(choose_thread_budget(2, 1, "1", nullptr, BlasPool::kOwn));
  EXPECT_EQ(at::get_num_threads(), 1);
  EXPECT_NE(line.find("1 intra-op"), std::string::npos) << line;
  at::set_num_threads(before);
}

// NOTE [BLAS kernels]: which OpenBLAS kernels to start again with, for what it picked and what
// the CPU has.
TEST(ThreadBudget, BlasKernelsForTheCpusVectorsWhereOpenBlasPickedNarrowerOnes) {
  using blas::choose_core;
  using blas::CpuVectors;
  // Prescott's SSE3 on an AVX-512 CPU (issue [41]'s Xeon): SkylakeX's.
  EXPECT_EQ(choose_core("Prescott", CpuVectors::kAvx512, false, nullptr, nullptr, nullptr).set,
            "SkylakeX");
  EXPECT_EQ(choose_core("Nehalem", CpuVectors::kAvx2, false, nullptr, nullptr, nullptr).set,
            "Haswell");
  EXPECT_EQ(choose_core("Prescott", CpuVectors::kAvx2, true, nullptr, nullptr, nullptr).set, "Zen");
  // A pick as wide as the CPU's vectors, or wider by name (Cooperlake is AVX-512 too): kept.
  for (const char* picked : {"SkylakeX", "Cooperlake", "SapphireRapids"})
    EXPECT_EQ(choose_core(picked, CpuVectors::kAvx512, false, nullptr, nullptr, nullptr).set, "")
        << picked;
  EXPECT_EQ(choose_core("Zen", CpuVectors::kAvx2, true, nullptr, nullptr, nullptr).set, "");
  EXPECT_EQ(choose_core("Haswell", CpuVectors::kAvx2, false, nullptr, nullptr, nullptr).reason, "");
  // Not a DYNAMIC_ARCH OpenBLAS, or no vectors to speak of: nothing.
  EXPECT_EQ(choose_core("", CpuVectors::kAvx512, false, nullptr, nullptr, nullptr).set, "");
  EXPECT_EQ(choose_core("Prescott", CpuVectors::kOther, false, nullptr, nullptr, nullptr).set, "");
  // Off, a user's own OPENBLAS_CORETYPE, and the process started again: kept, and said.
  const blas::CoreChoice off =
      choose_core("Prescott", CpuVectors::kAvx512, false, "off", nullptr, nullptr);
  EXPECT_EQ(off.set, "");
  EXPECT_EQ(off.reason,
            "kernels Prescott, OpenBLAS's pick on this AVX-512 CPU, whose SkylakeX kernels run "
            "faster (VESCALE_BLAS_CORE=off)");
  const blas::CoreChoice own =
      choose_core("Haswell", CpuVectors::kAvx512, false, nullptr, "Haswell", nullptr);
  EXPECT_EQ(own.set, "");
  EXPECT_EQ(own.reason, "kernels Haswell (OPENBLAS_CORETYPE=Haswell)");
  const blas::CoreChoice again =
      choose_core("SkylakeX", CpuVectors::kAvx512, false, nullptr, "SkylakeX", "Prescott");
  EXPECT_EQ(again.set, "");
  EXPECT_EQ(again.reason,
            "kernels SkylakeX (OpenBLAS picked Prescott on this AVX-512 CPU; "
            "VESCALE_BLAS_CORE=off keeps its own)");
}

}  // namespace
}  // namespace vescale
