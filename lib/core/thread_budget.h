#pragma once
// How many threads a rank gives ATen's intra-op pool and OpenBLAS.
//
// NOTE [Thread budget]: both pools spin while they wait for work, so on a CPU they must not be
// sized as if each had the cores to itself. Measured on the 2-core development machine
// (configs/gpt-tiny.toml at T = 128, float32, one process, tokens/s; scripts/bench.sh):
//
//   intra-op  OpenBLAS   1 process        note
//   2         2           ~5,000          the old default: the pools fight over the cores
//   1         1           ~9,100
//   2         1          ~10,600
//   1         2          ~12,000          the default now
//
// and with ranks sharing the cores, anything above one thread per rank in either pool collapses
// (dp = 2 with 2 intra-op threads each: ~700 tokens/s). So a rank gets 1 intra-op thread and
// cores / local ranks BLAS threads: the matmuls are where the time goes (NOTE [Explicit
// attention] keeps the elementwise work small). OMP_NUM_THREADS (intra-op) and
// OPENBLAS_NUM_THREADS override either; our launcher passes the choice to its workers in them.

#include <string>

namespace vescale {

struct ThreadBudget {
  int intra_op = 1;  ///< ATen's intra-op threads (at::set_num_threads)
  int blas = 1;      ///< OpenBLAS threads
  std::string origin;  ///< where the numbers came from, for the log
};

/// The budget of one of `local_ranks` ranks on `cores` cores. `omp` and `openblas` are the
/// values of OMP_NUM_THREADS and OPENBLAS_NUM_THREADS (null when unset); a positive one wins.
ThreadBudget choose_thread_budget(int cores, int local_ranks, const char* omp,
                                  const char* openblas);

/// The budget of this process: its cores and environment, as one of `local_ranks`.
ThreadBudget thread_budget_from_env(int local_ranks);

/// Sets ATen's intra-op threads and, when the BLAS is OpenBLAS, its threads (it read its
/// environment when it was loaded, before main). Returns a line for the log.
std::string apply_thread_budget(const ThreadBudget& budget);

}  // namespace vescale
