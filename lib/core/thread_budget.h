#pragma once
// How many threads a rank gives ATen's intra-op pool and OpenBLAS.
//
// NOTE [Thread budget]: both pools spin while they wait for work, so on a CPU they must not be
// sized as if each had the cores to itself. Measured on the 2-core development machine, quiet
// (configs/gpt-tiny.toml at T = 128, float32, 60 steps, tokens/s, two runs each):
//
//   intra-op  OpenBLAS   1 process        dp = 2 (per rank)
//   2         2           5,113 / 5,002   -                 (the old 1-process default)
//   1         1          10,118 / 9,725   15,936            (the old dp = 2 default)
//   2         1          10,719 / 10,394   4,585
//   1         2          11,070 / 10,727  14,853
//
// So a rank gets 1 intra-op thread and cores / local ranks OpenBLAS threads: the matmuls are
// where the time goes (NOTE [Explicit attention] keeps the elementwise work small), and two
// ranks each with 2 intra-op threads on 2 cores collapse. OMP_NUM_THREADS (intra-op) and
// OPENBLAS_NUM_THREADS override either; our launcher passes the choice to its workers in them.
// A BLAS without a pool of its own (MKL in the PyPI wheel's LibTorch runs its matmuls on ATen's
// OpenMP threads, and at::set_num_threads sets both) gets cores / local ranks intra-op threads
// instead: one intra-op thread would hold its matmuls to one core. Measured on the 2-core Xeon
// (2026-12-02, the same job at 40 steps, two runs): the wheel's LibTorch 2.11 at 1 intra-op
// thread 16,472 / 12,992 tokens/s, at 2 30,049 / 21,420 (Debian's build at 2 + 2 7,662 / 7,577).

#include <string>

namespace vescale {

struct ThreadBudget {
  int intra_op = 1;  ///< ATen's intra-op threads (at::set_num_threads)
  int blas = 1;      ///< OpenBLAS threads
  int cores = 1;     ///< this rank's share of the cores (host work outside both pools)
  /// The machine's cores over its local ranks, a fraction where ranks share a core: the cores
  /// the CPU's MFU peak counts for this rank (NOTE [MFU peak]), whatever the threads.
  double core_share = 1;
  std::string origin;  ///< where the numbers came from, for the log
};

/// Where the BLAS's matmuls run: a pool of its own (OpenBLAS), or ATen's intra-op threads (MKL).
enum class BlasPool { kOwn, kAtens };

/// The BLAS's pool in this process: kOwn where it is OpenBLAS.
BlasPool blas_pool();

/// The budget of one of `local_ranks` ranks on `cores` cores whose BLAS runs on `pool`. `omp` and
/// `openblas` are the values of OMP_NUM_THREADS and OPENBLAS_NUM_THREADS (null when unset); a
/// positive one wins.
ThreadBudget choose_thread_budget(int cores, int local_ranks, const char* omp, const char* openblas,
                                  BlasPool pool);

/// The budget of this process: its cores and environment, as one of `local_ranks`.
ThreadBudget thread_budget_from_env(int local_ranks);

/// Sets ATen's intra-op threads, the rank's cores (core/host_parallel.h) and, when the BLAS is
/// OpenBLAS, its threads (it read its environment when it was loaded, before main). Returns a line
/// for the log.
std::string apply_thread_budget(const ThreadBudget& budget);

/// The core_share of the budget apply_thread_budget applied; before any, every core of the
/// machine (one process).
double rank_core_share();

/// ATen's intra-op pool and OpenBLAS at one thread while it lives; the counts before it after.
class OneThread {
 public:
  OneThread();
  ~OneThread();
  OneThread(const OneThread&) = delete;
  OneThread& operator=(const OneThread&) = delete;

 private:
  int intra_op_;
  int blas_;  ///< 0 where the BLAS is not OpenBLAS
};

}  // namespace vescale
