#!/usr/bin/env bash
# Configures and builds vescale-train into build/ (or $BUILD_DIR), installing packages first if
# any are missing. Extra arguments go to cmake's configure step.
#
# Environment:
#   BUILD_DIR   the build folder (default build)
#   BUILD_TYPE  CMake's build type (default RelWithDebInfo)
#   JOBS        parallel compile jobs (default 2: a LibTorch translation unit needs ~1.5 GiB)
#   TARGETS     what to build, e.g. "vescale-train" (default: everything, tests included)
#   SETUP       the package set scripts/setup.sh installs: all (default) or run
#   UNITY       ON or OFF: unity build of lib/ and app/ (NOTE [Unity build] in CMakeLists.txt).
#               Default: ON for a new build folder; an existing one keeps what it was made with.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh "${SETUP:-all}"
BUILD_DIR=${BUILD_DIR:-build}
# Unity batches of 8 (NOTE [Unity build]), also in a folder the demo made with 32 (NOTE [Demo build]).
CONFIGURE=(-DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" -DVESCALE_WERROR=ON
  -DCMAKE_UNITY_BUILD_BATCH_SIZE=8)
if [ -f "$BUILD_DIR/CMakeCache.txt" ]; then
  [ -z "${UNITY:-}" ] || CONFIGURE+=(-DCMAKE_UNITY_BUILD="$UNITY")
else
  CONFIGURE+=(-DCMAKE_UNITY_BUILD="${UNITY:-ON}")
  command -v ninja >/dev/null && CONFIGURE+=(-G Ninja)  # an existing folder keeps its generator
fi
source scripts/lib/stage_clock.sh
stage_begin configure
cmake -S . -B "$BUILD_DIR" "${CONFIGURE[@]}" "$@"
stage_end
TARGET_ARGS=()
for t in ${TARGETS:-}; do TARGET_ARGS+=(--target "$t"); done
stage_begin build
cmake --build "$BUILD_DIR" -j "${JOBS:-2}" "${TARGET_ARGS[@]}"
stage_end
