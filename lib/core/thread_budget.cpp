#include "core/thread_budget.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <thread>

#include "core/blas_core.h"
#include "core/host_parallel.h"

namespace vescale {
namespace {

/// A positive thread count from an environment value, else 0.
int positive(const char* value) {
  if (value == nullptr) return 0;
  char* end = nullptr;
  const long n = std::strtol(value, &end, 10);
  return end != value && *end == '\0' && n > 0 && n < 1 << 16 ? static_cast<int>(n) : 0;
}

int machine_cores() {
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

std::atomic<double> g_core_share{0};

// OpenBLAS is found by its symbols, not linked against: the BLAS is whatever Debian's
// alternatives (or the user's LibTorch) put behind libblas. Null where it is not OpenBLAS.
using SetThreads = void (*)(int);
using GetThreads = int (*)();
SetThreads openblas_set_threads() {
  return reinterpret_cast<SetThreads>(::dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
}

}  // namespace

BlasPool blas_pool() {
  return openblas_set_threads() != nullptr ? BlasPool::kOwn : BlasPool::kAtens;
}

ThreadBudget choose_thread_budget(int cores, int local_ranks, const char* omp, const char* openblas,
                                  BlasPool pool) {
  ThreadBudget b;
  const int per_rank = std::max(1, std::max(1, cores) / std::max(1, local_ranks));
  // NOTE [Thread budget]: a BLAS on ATen's threads needs them to use the rank's cores.
  b.intra_op = pool == BlasPool::kOwn ? 1 : per_rank;
  b.blas = per_rank;
  b.cores = per_rank;
  b.core_share = static_cast<double>(std::max(1, cores)) / std::max(1, local_ranks);
  b.origin =
      fmt::format("{} cores / {} local rank{}", cores, local_ranks, local_ranks == 1 ? "" : "s");
  if (const int n = positive(omp)) {
    b.intra_op = n;
    b.origin += ", OMP_NUM_THREADS";
  }
  if (const int n = positive(openblas)) {
    b.blas = n;
    b.origin += ", OPENBLAS_NUM_THREADS";
  }
  return b;
}

ThreadBudget thread_budget_from_env(int local_ranks) {
  return choose_thread_budget(machine_cores(), local_ranks, std::getenv("OMP_NUM_THREADS"),
                              std::getenv("OPENBLAS_NUM_THREADS"), blas_pool());
}

std::string apply_thread_budget(const ThreadBudget& budget) {
  at::set_num_threads(budget.intra_op);
  set_rank_cores(budget.cores);
  g_core_share.store(budget.core_share);
  using GetConfig = char* (*)();
  const SetThreads set = openblas_set_threads();
  auto config = reinterpret_cast<GetConfig>(::dlsym(RTLD_DEFAULT, "openblas_get_config"));
  std::string blas = "the BLAS on them (not OpenBLAS)";
  if (set != nullptr) {
    set(budget.blas);
    blas = fmt::format("OpenBLAS {} thread{}", budget.blas, budget.blas == 1 ? "" : "s");
    if (config != nullptr) blas += fmt::format(" ({})", config());
    if (const std::string kernels = blas::kernels_text(); !kernels.empty())
      blas += ", " + kernels;  // NOTE [BLAS kernels]
  }
  return fmt::format("threads: {} intra-op, {}, {} for init [{}]", budget.intra_op, blas,
                     budget.cores, budget.origin);
}

double rank_core_share() {
  const double set = g_core_share.load();
  return set > 0 ? set : machine_cores();
}

OneThread::OneThread() : intra_op_(at::get_num_threads()), blas_(0) {
  at::set_num_threads(1);
  if (const SetThreads set = openblas_set_threads()) {
    if (auto get = reinterpret_cast<GetThreads>(::dlsym(RTLD_DEFAULT, "openblas_get_num_threads")))
      blas_ = get();
    set(1);
  }
}

OneThread::~OneThread() {
  at::set_num_threads(intra_op_);
  if (const SetThreads set = openblas_set_threads(); set != nullptr && blas_ > 0) set(blas_);
}

}  // namespace vescale
