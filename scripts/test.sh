#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, and runs every test with ctest.
# Usage: scripts/test.sh [ctest arguments, e.g. -R Collectives]
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/lib/stage_clock.sh
stage_begin packages
bash scripts/setup.sh all
stage_end
# Tests and benchmarks on, should the demo have made the build folder without them.
bash scripts/build.sh -DVESCALE_BUILD_TESTS=ON -DVESCALE_BUILD_BENCH=ON
cd "${BUILD_DIR:-build}"
stage_begin ctest
rc=0
ctest -j "${JOBS:-2}" --output-on-failure --timeout 900 "$@" || rc=$?
stage_end
exit $rc
