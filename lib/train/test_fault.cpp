#include "train/test_fault.h"

#include <signal.h>

#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/error.h"

namespace vescale {

void maybe_die_for_test(int rank, int64_t step) {
  static const char* spec = std::getenv("VESCALE_TEST_DIE_AT_STEP");
  if (spec == nullptr) return;
  int die_rank = -1, attempts = 1;
  long long die_step = -1;
  const int n = std::sscanf(spec, "%d:%lld:%d", &die_rank, &die_step, &attempts);
  VS_CHECK(n >= 2, "[test] VESCALE_TEST_DIE_AT_STEP='{}': expected rank:step[:attempts]", spec);
  const char* attempt_text = std::getenv("VESCALE_RESTART_COUNT");
  const int attempt = attempt_text != nullptr ? std::atoi(attempt_text) : 0;
  if (rank == die_rank && step == die_step && attempt < attempts) {
    spdlog::warn("[test] rank {} kills itself before step {} (attempt {})", rank, die_step,
                 attempt);
    spdlog::default_logger()->flush();
    ::raise(SIGKILL);
  }
}

}  // namespace vescale
