// Faults to inject on purpose, for the restart and liveness tests (tests/e2e/): the app passes
// them to the training loop as a hook; the library knows nothing of them.
#pragma once

#include <cstdint>

#include "comm/group.h"
#include "train/trainer.h"

namespace vescale {

/// Test only: VESCALE_TEST_DIE_AT_STEP="rank:step[:attempts]" makes rank `rank` SIGKILL itself
/// as it is about to run 0-based step `step`, in the local launcher's attempts below `attempts`
/// (default 1: the first run only; the launcher sets VESCALE_RESTART_COUNT to the attempt).
/// A no-op when the variable is unset.
void maybe_die_for_test(int rank, int64_t step);

/// Test only: VESCALE_TEST_HANG_AT_STEP="rank:step" makes rank `rank` hang (sleep forever, in no
/// collective) as it is about to run 0-based step `step`: a deadlock in compute, for the
/// launcher's heartbeat to find (tests/e2e/test_liveness.py). A no-op when unset.
void maybe_hang_for_test(int rank, int64_t step);

/// Test only: VESCALE_TEST_HANG_AT_COLLECTIVE="rank:label:seq" makes world rank `rank` hang (sleep
/// forever) as it is about to post collective #seq of its group labelled `label` ("tp", "dp",
/// ...): a rank that never enters a collective its peers wait in, for the flight recorder's
/// diagnosis (tests/e2e/test_flight_recorder.py). A no-op when unset.
void hang_at_collective_for_test(const comm::Group& world);

/// Test only: VESCALE_TEST_STAGE_ON_HOST=1 makes Gloo stage a job's CPU tensors through host
/// buffers of their own, as it stages CUDA tensors (NOTE [Gloo with CUDA tensors]): the CPU's runs
/// of the layouts then take the path ranks sharing a GPU take. False when unset.
bool stage_on_host_for_test();

/// The training loop's hooks that run both before each step.
TrainHooks test_fault_hooks();

}  // namespace vescale
