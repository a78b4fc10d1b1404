#!/usr/bin/env bash
# Records the curves of nine layouts, or compares them with a recording: what a refactor
# that must change no number shows bitwise (issues [27] item 5, [33] item 1). Each layout trains
# configs/gpt-dp2-tp2.toml in float64 (dropout 0.1, seq 64, 6 steps, validation every 3) and keeps
# every logged loss, val_loss and grad_norm exactly as metrics.jsonl holds them (17 digits).
#
#   scripts/curves.sh record DIR     # with the binary before the change
#   scripts/curves.sh compare DIR    # after it: exit 1 on any number that differs
#
# VESCALE_TRAIN names the binary (default build/vescale-train); DTYPE the training.dtype (default
# float64; bfloat16 checks the mixed-precision path the same way).
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=${1:-}
DIR=${2:-}
[[ $MODE == record || $MODE == compare ]] && [ -n "$DIR" ] || {
  echo "usage: scripts/curves.sh record|compare DIR" >&2
  exit 2
}
BIN=${VESCALE_TRAIN:-build/vescale-train}
[ -x "$BIN" ] || { echo "[curves] no binary at $BIN (build it, or set VESCALE_TRAIN)" >&2; exit 2; }

declare -A LAYOUTS=(
  [1-process]="--parallel.dp=1 --parallel.tp=1 --parallel.plan="
  [dp2xtp2-sp]="--parallel.dp=2 --parallel.tp=2 --parallel.plan=gpt/megatron-sp"
  [pp2xdp2xtp2]="--parallel.pp=2 --parallel.dp=2 --parallel.tp=2 --parallel.plan=gpt/megatron-sp --parallel.microbatches=2"
  [cp2xtp2]="--parallel.cp=2 --parallel.tp=2 --parallel.dp=1 --parallel.plan=gpt/megatron-sp"
  [zero3-dp2]="--parallel.dp=2 --parallel.tp=1 --parallel.plan= --parallel.zero=3"
  [zero1-dp2]="--parallel.dp=2 --parallel.tp=1 --parallel.plan= --parallel.zero=1"
  [zero2-dp2]="--parallel.dp=2 --parallel.tp=1 --parallel.plan= --parallel.zero=2"
  [tp2]="--parallel.dp=1 --parallel.tp=2 --parallel.plan=gpt/megatron-tp"
  [pp2]="--parallel.pp=2 --parallel.dp=1 --parallel.tp=1 --parallel.plan= --parallel.microbatches=2"
)
COMMON=(--training.dtype="${DTYPE:-float64}" --model.dropout=0.1 --training.seq_len=64 --model.block_size=64
  --training.steps=6 --eval.interval=3 --eval.windows=2 --metrics.log_interval=1
  --checkpoint.interval=0 --checkpoint.overwrite=true)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$DIR"
status=0
for name in $(printf '%s\n' "${!LAYOUTS[@]}" | sort); do
  # shellcheck disable=SC2086  # a layout is several arguments
  if ! "$BIN" train configs/gpt-dp2-tp2.toml "${COMMON[@]}" ${LAYOUTS[$name]} \
    --job.dump_folder="$work/$name" >"$work/$name.log" 2>&1; then
    tail -5 "$work/$name.log" >&2
    echo "[curves] $name: the run failed" >&2
    exit 1
  fi
  python3 -c '
import json, sys
for line in open(sys.argv[1]):
    m = json.loads(line)
    print(m["step"], *(f"{k}={json.dumps(m[k])}" for k in ("loss", "val_loss", "grad_norm") if k in m))
' "$work/$name/metrics.jsonl" >"$work/$name.curve"
  if [ "$MODE" = record ]; then
    cp "$work/$name.curve" "$DIR/$name.curve"
    echo "[curves] $name: $(wc -l <"$DIR/$name.curve") steps recorded"
  elif cmp -s "$work/$name.curve" "$DIR/$name.curve"; then
    echo "[curves] $name: $(wc -l <"$DIR/$name.curve") steps, every number bitwise equal"
  else
    echo "[curves] $name: differs from the recording:"
    diff "$DIR/$name.curve" "$work/$name.curve" | head -10
    status=1
  fi
done
exit $status
