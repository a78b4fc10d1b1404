#include "test_faults.h"

#include <signal.h>

#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

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

void maybe_hang_for_test(int rank, int64_t step) {
  static const char* spec = std::getenv("VESCALE_TEST_HANG_AT_STEP");
  if (spec == nullptr) return;
  int hang_rank = -1;
  long long hang_step = -1;
  VS_CHECK(std::sscanf(spec, "%d:%lld", &hang_rank, &hang_step) == 2,
           "[test] VESCALE_TEST_HANG_AT_STEP='{}': expected rank:step", spec);
  if (rank != hang_rank || step != hang_step) return;
  spdlog::warn("[test] rank {} hangs before step {}", rank, hang_step);
  spdlog::default_logger()->flush();
  while (true)
    std::this_thread::sleep_for(std::chrono::seconds(1));
}

void hang_at_collective_for_test(const comm::Group& world) {
  const char* spec = std::getenv("VESCALE_TEST_HANG_AT_COLLECTIVE");
  if (spec == nullptr) return;
  int hang_rank = -1;
  char label[32] = {};
  unsigned long long seq = 0;
  VS_CHECK(std::sscanf(spec, "%d:%31[^:]:%llu", &hang_rank, label, &seq) == 3,
           "[test] VESCALE_TEST_HANG_AT_COLLECTIVE='{}': expected rank:label:seq", spec);
  if (world.rank() != hang_rank) return;
  world.flight()->set_before_call([label = std::string(label), seq](const comm::FlightGroup& group,
                                                                    uint64_t next, bool transfer) {
    if (transfer || group.label != label || next != seq) return;
    spdlog::warn("[test] rank hangs before collective #{} of its {} group", seq, label);
    spdlog::default_logger()->flush();
    while (true)
      std::this_thread::sleep_for(std::chrono::seconds(1));
  });
}

bool stage_on_host_for_test() {
  const char* value = std::getenv("VESCALE_TEST_STAGE_ON_HOST");
  return value != nullptr && std::string(value) == "1";
}

TrainHooks test_fault_hooks() {
  return {[](int rank, int64_t step) {
    maybe_die_for_test(rank, step);
    maybe_hang_for_test(rank, step);
  }};
}

}  // namespace vescale
