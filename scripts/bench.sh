#!/usr/bin/env bash
# Benchmarks, each printing a table. Today: collectives over every mesh dim (comm bench) on 2 and
# 4 local processes. Usage: scripts/bench.sh [--sizes 1K,1M,16M]
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/build.sh >/dev/null
BIN="${BUILD_DIR:-build}/vescale-train"
SIZES=(--sizes 1K,64K,1M,16M)
[ $# -gt 0 ] && SIZES=("$@")
"$BIN" comm bench --nproc 2 "${SIZES[@]}" 2>/dev/null
echo
"$BIN" comm bench --nproc 4 --mesh pp=1,dp=2,tp=2 "${SIZES[@]}" 2>/dev/null
