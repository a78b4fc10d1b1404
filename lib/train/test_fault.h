// A fault to inject on purpose, for the restart tests (tests/e2e/test_restart.py).
#pragma once

#include <cstdint>

namespace vescale {

/// Test only: VESCALE_TEST_DIE_AT_STEP="rank:step[:attempts]" makes rank `rank` SIGKILL itself
/// as it is about to run 0-based step `step`, in the local launcher's attempts below `attempts`
/// (default 1: the first run only; the launcher sets VESCALE_RESTART_COUNT to the attempt).
/// A no-op when the variable is unset.
void maybe_die_for_test(int rank, int64_t step);

}  // namespace vescale
