#!/usr/bin/env bash
# Chaos run: SIGKILLs a random worker at 20 random moments of a float64 dp=2 run that checkpoints
# every step, resumed each time from `latest` by `train --max-restarts`, and checks that every
# step's loss equals the uninterrupted run's within 1e-10; prints the table of kills.
# Usage: scripts/chaos.sh [KILLS (default 20)] [SEED (default 11)]; needs a built build/ (or
# $BUILD_DIR). CI runs the same test with 5 kills (ctest -R e2e.test_chaos).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
export VESCALE_TRAIN=${VESCALE_TRAIN:-$PWD/$BUILD_DIR/vescale-train}
export VESCALE_CHAOS_KILLS=${1:-20}
export VESCALE_CHAOS_SEED=${2:-11}
export PYTHONDONTWRITEBYTECODE=1
cd tests/e2e
exec python3 -m unittest -v test_chaos
