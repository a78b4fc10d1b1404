#!/usr/bin/env bash
# Configures and builds vescale-train into build/ (or $BUILD_DIR), installing packages first if
# any are missing. Extra arguments go to cmake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
BUILD_DIR=${BUILD_DIR:-build}
GENERATOR=()
command -v ninja >/dev/null && GENERATOR=(-G Ninja)
[ -f "$BUILD_DIR/CMakeCache.txt" ] && GENERATOR=()  # keep the generator it was made with
cmake -S . -B "$BUILD_DIR" "${GENERATOR[@]}" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" \
  -DVESCALE_WERROR=ON "$@"
# Two jobs: LibTorch translation units need ~1.5 GiB each and this machine has 2 cores.
cmake --build "$BUILD_DIR" -j "${JOBS:-2}"
