#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, and runs every test with ctest.
# Usage: scripts/test.sh [ctest arguments, e.g. -R Collectives]
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/build.sh
cd "${BUILD_DIR:-build}"
ctest -j "${JOBS:-2}" --output-on-failure --timeout 900 "$@"
