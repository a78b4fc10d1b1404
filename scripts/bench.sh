#!/usr/bin/env bash
# Benchmarks, each printing a table:
#   1. collectives over every mesh dim (comm bench) on 2 and 4 local processes;
#   2. training throughput of configs/gpt-tiny.toml (float32, 60 steps) on 1 process and on the
#      config's dp=2 x tp=2 mesh.
# Usage: scripts/bench.sh [--sizes 1K,1M,16M]
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/build.sh >/dev/null
[ -f data/fortunes.txt ] || bash scripts/prepare_fortunes.sh >/dev/null
BIN="${BUILD_DIR:-build}/vescale-train"
SIZES=(--sizes 1K,64K,1M,16M)
[ $# -gt 0 ] && SIZES=("$@")

"$BIN" comm bench --nproc 2 "${SIZES[@]}" 2>/dev/null
echo
"$BIN" comm bench --nproc 4 --mesh pp=1,dp=2,tp=2 "${SIZES[@]}" 2>/dev/null
echo

OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
train() {  # name, overrides...
  local name=$1; shift
  "$BIN" train configs/gpt-tiny.toml --job.dump_folder="$OUT/$name" --training.steps=60 \
    --eval.interval=0 --eval.windows=4 --metrics.log_interval=60 "$@" 2>&1 | grep "done:" | sed 's/.*done: //'
}
echo "training throughput: configs/gpt-tiny.toml, float32, 60 steps (tokens/s after the first step)"
printf "%-24s %s\n" "layout" "result"
printf "%-24s %s\n" "1 process" "$(train single --parallel.dp=1 --parallel.tp=1 --parallel.plan=)"
printf "%-24s %s\n" "dp=2 x tp=2 megatron-sp" "$(train dp2tp2)"
printf "%-24s %s\n" "dp=2 x tp=2 megatron-tp" "$(train dp2tp2tp --parallel.plan=gpt/megatron-tp)"
