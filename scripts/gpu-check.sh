#!/usr/bin/env bash
# Checks vescale-train on a GPU machine in one call (docs/design.md §18 "One GPU check"):
#   build    the wheel route: scripts/setup-cuda.sh configures build-cuda/ (Release) against the
#            machine's PyTorch, then only vescale-train is built
#   parity   a small GPT (dropout 0.1), Llama and Mixtral for 20 steps on CUDA (one rank, NCCL)
#            against the CPU: float64, float32 and bf16 losses (GPT and Llama bf16 also with every
#            CUDA kernel row taken, those no GPU has run too: training.unverified_kernels); dp 2 over
#            Gloo on 2 processes; a CUDA checkpoint resumed on the CPU; eval and greedy generate
#            from it on CUDA against the CPU. Then the kernel rows the passing CUDA runs took
#            (NOTE [GPU-verified]): those the binary does not yet call GPU-verified are printed
#            with the line to write into lib/kernels/kernel_table.cpp
#   ranks    several ranks sharing the one GPU (NOTE [Ranks sharing a GPU]): float64 on CUDA over
#            Gloo, each layout's 10 steps against the CPU's 1-process run (1e-10): dp2 x tp2
#            megatron-sp, pp2 x dp2 1f1b with 2 micro-batches, dp2 ZeRO-3, cp2 x tp2, Mixtral ep2
#            over dp2, Llama tp2 (grouped-query attention); the dp2 x tp2 run's step-5 sharded
#            checkpoint resumed on the CPU at 1 process; bf16 dp2 x tp2 against float32 on the CPU
#            (2e-2). Each row with its time. Skipped on --cpu (the CPU's tests run these layouts;
#            RANKS_ON_CPU=1 runs it there too, with VESCALE_TEST_STAGE_ON_HOST=1 through the
#            staging path that CUDA tensors take: 42 s on 2 cores)
#   kernels  the kernel table's rows on the GPU against the CPU's explicit rows, each kernel
#            forward and backward in float32, bf16 and float16, those no GPU has run too (our own
#            CUDA kernels: NOTE [CUDA kernels]), and our kernels at large and odd shapes, a process
#            a kernel: the test binary built from tests/kernels/kernel_table_test.cpp and
#            cuda_kernels_test.cpp alone; then each of our rows timed against its fallback
#            (vescale-kernel-speed: ms, GB/s or TFLOP/s, and whether it is faster)
#   bench    GPT-2 124M bf16, batch 16 x 1024 (configs/gpt2-124m.toml) in vescale-train, in
#            vescale-train without its fused loss and projections (the "before" of [25]), PyTorch
#            eager and torch.compile (bench/peers/gpt_torch.py): tokens/s, MFU, peak GPU memory;
#            then a short run with metrics.peak_flops = 0 and training.unverified_kernels = true
#            whose own MFU (metrics.jsonl, from the device's peak: NOTE [MFU peak]) is held to
#            this script's 6N + 12LCT at the same tokens/s, within 1 point; last Llama 1.1B
#            (configs/llama-1b.toml on one GPU, batch 4 x 2048) with its own MFU. vescale-train's rows
#            also split the median step into its phases (fwd bwd sync opt other, NOTE [Step
#            anatomy]) as the host's clock saw them: on a GPU the host runs ahead, and the phase
#            holding the step's one host read (opt) also waits out the device's queued work
#   profile  train --profile 3-3: the Chrome trace's phase and CUDA kernel events, and from them
#            (scripts/lib/trace_summary.py) how long the GPU was busy in the step and its 12
#            kernels of most device time
# Last it prints a table of every figure against its bar, also written to
# bench/results/<gpu>-<YYYY-MM-DD>.txt and DIR/table.txt, and, when OUT is set (the GPU machine's
# tool brings back only what is under $OUT), to $OUT with every run's output in $OUT/logs.tgz.
#
#   scripts/gpu-check.sh [--cpu] [--stages build,parity,ranks,kernels,bench,profile] [--out DIR]
#
# --cpu: the same stages on the CPU, for CI (tests/e2e/test_gpu_check.py): the "cuda" side of
# each parity row runs on the CPU too, so its figures must come out 0 or near; the bench runs a
# small GPT; nothing goes to bench/results/. --out DIR keeps the table (DIR/table.txt) and each
# run's output, metrics.jsonl and config (DIR/logs/); default: a fresh temporary folder.
# Environment: VESCALE_TRAIN (a built binary: no build), PYTHON (a python3 that imports torch, for
# the peers), DEADLINE (seconds, default 420: no stage and no bench row starts later), END
# (seconds, default DEADLINE + 60: every run's timeout is cut to end by then, 5 s at the least),
# so that one call of 8 minutes holds it all.
# Exit status: 0 when no check failed, 1 when one did, 2 for a wrong option.
set -uo pipefail
CALLER_DIR=$PWD
cd "$(dirname "$0")/.." || exit 2
# from_caller PATH: PATH as the caller meant it (relative to where they ran this from).
from_caller() { [[ $1 == /* ]] && echo "$1" || echo "$CALLER_DIR/$1"; }

usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

MODE=gpu
STAGES=build,parity,ranks,kernels,bench,profile
OUT_DIR=""
COMMAND="scripts/gpu-check.sh $*"
while [ $# -gt 0 ]; do
  case $1 in
    --cpu) MODE=cpu ;;
    --stages | --out)
      [ $# -ge 2 ] || { echo "gpu-check: $1 needs a value (see --help)" >&2; exit 2; }
      [ "$1" = --stages ] && STAGES=$2 || OUT_DIR=$2
      shift ;;
    --stages=*) STAGES=${1#*=} ;;
    --out=*) OUT_DIR=${1#*=} ;;
    -h | --help) usage; exit 0 ;;
    *) echo "gpu-check: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
for stage in ${STAGES//,/ }; do
  case $stage in
    build | parity | ranks | kernels | bench | profile) ;;
    *) echo "gpu-check: unknown stage '$stage' (build, parity, ranks, kernels, bench, profile)" >&2; exit 2 ;;
  esac
done
wanted() { [[ ",$STAGES," == *",$1,"* ]]; }

if [ $MODE = gpu ] && ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu-check: no GPU here (nvidia-smi -L fails); on a machine without one run --cpu" >&2
  exit 2
fi

DEADLINE=${DEADLINE:-420}
END=${END:-$((DEADLINE + 60))}
[ -n "$OUT_DIR" ] && OUT_DIR=$(from_caller "$OUT_DIR")
[ -n "${OUT:-}" ] && OUT=$(from_caller "$OUT")
OUT_DIR=${OUT_DIR:-$(mktemp -d /tmp/gpu-check.XXXXXX)}
mkdir -p "$OUT_DIR/logs" || exit 2
OUT_DIR=$(realpath "$OUT_DIR")
if [ -n "${OUT:-}" ] && [ "$(realpath -m "$OUT")" = "$OUT_DIR" ]; then
  # $OUT comes back only if it holds a few files: the table and logs.tgz, not the logs.
  echo "gpu-check: --out must be another folder than \$OUT ($OUT)" >&2
  exit 2
fi
LOGS=$OUT_DIR/logs
# The runs' dump folders (checkpoints, traces) stay out of the out folder: only what a reader needs
# is copied into it, so that $OUT holds few files.
SCRATCH=$(mktemp -d /tmp/gpu-check-runs.XXXXXX)
trap 'rm -rf "$SCRATCH"' EXIT

# The parity rows' "cuda" side, the bench's config and how many of its first steps the medians
# leave out (CUDA warm-up: allocator, cuBLAS plans, torch.compile).
if [ $MODE = gpu ]; then
  DEV=cuda SIDE=cuda WARMUP=10 BENCH_STEPS=40 PROFILE_STEPS=4
  BIN=${VESCALE_TRAIN:-build-cuda/vescale-train}
else
  DEV=cpu SIDE="cuda*" WARMUP=1 BENCH_STEPS=6 PROFILE_STEPS=4
  BIN=${VESCALE_TRAIN:-${BUILD_DIR:-build}/vescale-train}
fi
if [ -n "${VESCALE_TRAIN:-}" ]; then
  # a path from where the caller stands, or a name on PATH
  [[ $BIN == */* ]] && BIN=$(from_caller "$BIN") || BIN=$(command -v "$BIN" || echo "$BIN")
fi

# --- reporting -------------------------------------------------------------------------------

PASSED=0 FAILED=0 SKIPPED=0 BUILD_FAILED=0
HEADER=() BUILD_ROWS=() STAGE_ROWS=() PARITY_ROWS=() BENCH_ROWS=() PROFILE_ROWS=() KERNEL_TEST_ROWS=()
KERNEL_ROWS=() MFU_ROWS=()
VERIFIED_RUNS=()  # the device-side runs whose parity rows passed: their kernel rows are verified

say() { echo "[gpu-check ${SECONDS}s] $*"; }

# why_failed NAME: one line on why run NAME failed: its exit status and its first error line (or
# its last line), short enough for a table cell.
why_failed() {
  local log=$LOGS/$1.log line rc=${RUN_FAILED[$1]:-?}
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    echo "$1 timed out (exit $rc: its limit, or the call's END, came first)"
    return
  fi
  line=$(grep -m1 -E '(^|\] )(error|Error|terminate)' "$log" 2>/dev/null || tail -1 "$log" 2>/dev/null)
  line=$(tr -d '\r' <<<"$line" | tr '|' '/' | cut -c1-160)
  echo "$1 exited $rc: ${line:-no output}"
}

# tally ok|FAIL|skipped: counts a check's outcome for the summary line.
tally() {
  case $1 in
    ok) PASSED=$((PASSED + 1)) ;;
    FAIL) FAILED=$((FAILED + 1)) ;;
    *) SKIPPED=$((SKIPPED + 1)) ;;
  esac
}

# may_start WHAT: whether WHAT may still start; past DEADLINE it is skipped, with the reason, so
# that the table comes back inside the call's time.
may_start() {
  if ((SECONDS >= DEADLINE)); then
    say "skipped $1: past the deadline (${DEADLINE} s)"
    return 1
  fi
}

# limit SECONDS: a run's timeout, cut to what is left before END.
limit() {
  local left=$((END - SECONDS))
  ((left < 5)) && left=5
  echo $(($1 < left ? $1 : left))
}

table() {
  printf '%s\n' "${HEADER[@]}" ""
  printf '%s\n' "${BUILD_ROWS[@]}" ${STAGE_ROWS[@]+"${STAGE_ROWS[@]}"} ""
  if [ ${#PARITY_ROWS[@]} -gt 0 ]; then
    echo "| parity: max relative difference | figure | bar | result |"
    echo "| --- | --- | --- | --- |"
    printf '%s\n' "${PARITY_ROWS[@]}"
    [ $MODE = cpu ] && echo "(* --cpu: the \"cuda\" side ran on the CPU)"
    echo
  fi
  [ ${#KERNEL_ROWS[@]} -gt 0 ] && printf '%s\n' "${KERNEL_ROWS[@]}" ""
  [ ${#KERNEL_TEST_ROWS[@]} -gt 0 ] && printf '%s\n' "${KERNEL_TEST_ROWS[@]}" ""
  if [ ${#BENCH_ROWS[@]} -gt 0 ]; then
    echo "| bench: $BENCH_TITLE | tokens/s | MFU | median ms | peak allocated | peak reserved | nvidia-smi max | warm-up s | loss first → last | phases, median ms on the host's clock |"
    echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    printf '%s\n' "${BENCH_ROWS[@]}"
    echo
  fi
  [ ${#MFU_ROWS[@]} -gt 0 ] && printf '%s\n' "${MFU_ROWS[@]}" ""
  [ ${#PROFILE_ROWS[@]} -gt 0 ] && printf '%s\n' "${PROFILE_ROWS[@]}" ""
  echo "gpu-check: $PASSED passed, $FAILED failed, $SKIPPED skipped"
}

# Writes the table where it belongs; after every stage, so a call cut short still brings back
# what it measured.
publish() {
  table >"$OUT_DIR/table.txt"
  [ -n "${RESULTS:-}" ] && mkdir -p bench/results && cp "$OUT_DIR/table.txt" "$RESULTS"
  if [ -n "${OUT:-}" ]; then
    mkdir -p "$OUT"
    cp "$OUT_DIR/table.txt" "$OUT/${RESULTS:+$(basename "$RESULTS")}"
    tar czf "$OUT/logs.tgz" -C "$OUT_DIR" logs
  fi
}

# --- figures (python3's standard library: numpy is not everywhere) ---------------------------

# gpu_short_name NAME: "NVIDIA H100 80GB HBM3" -> h100, "NVIDIA A100-SXM4-80GB" -> a100.
gpu_short_name() {
  python3 - "$1" <<'PY'
import re, sys
words = [w for w in re.split(r"[\s_-]+", sys.argv[1])
         if w and w.lower() not in ("nvidia", "geforce", "tesla", "quadro")]
short = []
for word in words:
    short.append(word.lower())
    if re.search(r"\d", word):
        break
print(re.sub(r"[^a-z0-9]", "", "".join(short)) or "gpu")
PY
}

# max_relative REF RUN FIRST COUNT: the largest |run - ref| / |ref| of loss and val_loss over the
# steps >= FIRST of RUN's metrics.jsonl (COUNT of them, all in REF's); a reason and status 1 if not.
max_relative() {
  python3 - "$LOGS/$1.jsonl" "$LOGS/$2.jsonl" "$3" "$4" <<'PY'
import json, sys
def curve(path):
    try:
        with open(path) as f:
            return {r["step"]: r for r in map(json.loads, f)}
    except OSError:
        return {}
ref, run, first, count = curve(sys.argv[1]), curve(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
steps = [s for s in sorted(run) if s >= first and s in ref]
if len(steps) != count:
    print(f"{len(steps)} of {count} steps to compare")
    sys.exit(1)
worst = max(abs(run[s][k] - ref[s][k]) / abs(ref[s][k])
            for s in steps for k in ("loss", "val_loss") if k in run[s] and k in ref[s])
print(f"{worst:.2e}")
PY
}

# val_loss_relative RUN STEP EVAL_LOG: |eval's val_loss - RUN's at STEP| / RUN's.
val_loss_relative() {
  python3 - "$LOGS/$1.jsonl" "$2" "$3" <<'PY'
import json, re, sys
with open(sys.argv[1]) as f:
    ref = {r["step"]: r for r in map(json.loads, f)}.get(int(sys.argv[2]), {}).get("val_loss")
with open(sys.argv[3]) as f:
    said = re.findall(r"^val_loss (\S+)$", f.read(), re.M)
if ref is None or not said:
    print("no val_loss to compare")
    sys.exit(1)
print(f"{abs(float(said[-1]) - ref) / abs(ref):.2e}")
PY
}

# model_flops CONFIG: "FLOPS_PER_TOKEN PEAK_FLOPS" of a GPT config, counted as vescale-train's MFU
# counts them (models/gpt_family.cpp): 6 per parameter (all of them, the tied head once) and
# token, plus 12 L C T for attention; PEAK_FLOPS is metrics.peak_flops (0: not set).
model_flops() {
  python3 - "$1" <<'PY'
import math, sys, tomllib
with open(sys.argv[1], "rb") as f:
    c = tomllib.load(f)
m, t = c["model"], c["training"]
L, C, T = m["n_layer"], m["n_embd"], t["seq_len"]
multiple = max(1, m.get("vocab_multiple", 64)) * c.get("parallel", {}).get("tp", 1)
vocab = math.ceil(m["vocab_size"] / multiple) * multiple
params = vocab * C + m["block_size"] * C + L * (12 * C * C + 13 * C) + 2 * C
print(6 * params + 12 * L * C * T, float(c.get("metrics", {}).get("peak_flops", 0)))
PY
}

# vescale_figures RUN TOKENS_PER_STEP [WHO]: RUN's metrics.jsonl as the peer's --json object: the
# median step after WARMUP steps, warm-up time, losses, and the GPU allocator's peaks (gpu_mem, on
# CUDA); WHO names the row (default vescale-train).
vescale_figures() {
  python3 - "$LOGS/$1.jsonl" "$2" "$WARMUP" "${3:-vescale-train}" <<'PY'
import json, statistics, sys
with open(sys.argv[1]) as f:
    rows = [json.loads(line) for line in f]
tokens, warmup = int(sys.argv[2]), int(sys.argv[3])
timed = [r["step_time_s"] for r in rows if r["step"] > warmup]
if not timed:
    sys.exit(f"no steps after the first {warmup} in {sys.argv[1]}")
median = statistics.median(timed)
def peak(key):
    seen = [r["gpu_mem"][key] for r in rows if "gpu_mem" in r]
    return max(seen) if seen else None
# NOTE [Step anatomy]: each phase's median over the same steps, as the host's clock saw it.
phases = {name: 1e3 * statistics.median(r["time_s"][key] for r in rows if r["step"] > warmup)
          for name, key in (("fwd", "forward"), ("bwd", "backward"), ("sync", "grad_sync"),
                            ("opt", "optimizer"), ("other", "other"))}
mfus = [r["mfu"] for r in rows if r["step"] > warmup and r.get("mfu")]
print(json.dumps(dict(who=sys.argv[4], tokens_per_s=tokens / median, phases_ms=phases,
                      mfu=statistics.median(mfus) if mfus else None,
                      median_step_ms=median * 1e3,
                      warmup_s=sum(r["step_time_s"] for r in rows if r["step"] <= warmup),
                      peak_alloc_bytes=peak("allocated_peak"),
                      peak_reserved_bytes=peak("reserved_peak"),
                      loss_first=rows[0]["loss"], loss_last=rows[-1]["loss"])))
PY
}

# bench_row FIGURES_JSON SMI_MIB FLOPS_PER_TOKEN PEAK_FLOPS: a table row; MFU from tokens/s and the
# config's FLOPs per token, the same count for every row.
bench_row() {
  python3 - "$@" <<'PY'
import json, sys
f, smi, flops, peak = json.loads(sys.argv[1]), sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
gib = lambda b: "-" if b is None else f"{b / 2**30:.2f} GiB"
mfu = f"{100 * flops * f['tokens_per_s'] / peak:.1f}%" if peak > 0 else "-"
if flops == 0 and f.get("mfu"):  # a model this script does not count: its metrics' own MFU
    mfu = f"{100 * f['mfu']:.1f}% (its own)"
smi = f"{int(smi) / 1024:.2f} GiB" if smi.isdigit() else "-"
print(f"| {f['who']} | {f['tokens_per_s']:,.0f} | {mfu} | {f['median_step_ms']:.1f} | "
      f"{gib(f['peak_alloc_bytes'])} | {gib(f['peak_reserved_bytes'])} | {smi} | "
      f"{f['warmup_s']:.2f} | {f['loss_first']:.3f} → {f['loss_last']:.3f} | "
      + (" ".join(f"{k} {v:.1f}" for k, v in f["phases_ms"].items()) if "phases_ms" in f else "-")
      + " |")
PY
}

# trace_counts TRACE: "BYTES PHASES KERNELS" of a Chrome trace (an object with traceEvents, or a list).
trace_counts() {
  python3 - "$1" <<'PY'
import json, os, sys
with open(sys.argv[1]) as f:
    doc = json.load(f)
events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
count = lambda cat: sum(1 for e in events if isinstance(e, dict) and e.get("cat") == cat)
print(os.path.getsize(sys.argv[1]), count("phase"), count("kernel"))
PY
}

# --- runs ------------------------------------------------------------------------------------

SMI_PID=""
# GPU memory in use, sampled every 100 ms while a run goes on (the process's own figure where
# the allocator's statistics do not reach: CUDA context, cuBLAS workspaces, other allocators).
start_smi() {
  [ $MODE = gpu ] || return 0
  nvidia-smi --id=0 --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 \
    >"$LOGS/$1.smi" 2>/dev/null &
  SMI_PID=$!
}
stop_smi() {
  [ -n "$SMI_PID" ] && kill "$SMI_PID" 2>/dev/null && wait "$SMI_PID" 2>/dev/null
  SMI_PID=""
}
# smi_max NAME: the most MiB in use during run NAME ("-" on the CPU).
smi_max() { sort -n "$LOGS/$1.smi" 2>/dev/null | tail -1 | tr -dc '0-9' | grep . || echo -; }

# vrun NAME TIMEOUT CONFIG ARGS...: `vescale-train train` into its own dump folder; keeps its
# output and metrics.jsonl in the logs; returns its exit status.
vrun() {
  local name=$1 seconds=$2 config=$3 rc started=$SECONDS
  shift 3
  rm -rf "${SCRATCH:?}/$name" "$LOGS/$name.jsonl"  # never an earlier call's figures
  start_smi "$name"
  timeout -k 10 "$(limit "$seconds")" "$BIN" train "$config" --job.dump_folder="$SCRATCH/$name" \
    "$@" >"$LOGS/$name.log" 2>&1
  rc=$?
  stop_smi
  cp "$SCRATCH/$name/metrics.jsonl" "$LOGS/$name.jsonl" 2>/dev/null
  RUN_SECONDS[$name]=$((SECONDS - started))
  say "$name: exit $rc in ${RUN_SECONDS[$name]} s"
  [ $rc = 0 ] || { tail -3 "$LOGS/$name.log" | sed 's/^/    /'; RUN_FAILED[$name]=$rc; }
  return $rc
}
declare -A RUN_FAILED=()  # run name -> its exit status, for the runs that failed
declare -A RUN_SECONDS=() # run name -> its wall time in seconds

# prun NAME CONFIG ARGS...: the Python peer with --json; its figures are the last line of the log.
prun() {
  local name=$1 config=$2 rc started=$SECONDS
  shift 2
  start_smi "$name"
  timeout -k 10 "$(limit 240)" "$TORCH_PY" bench/peers/gpt_torch.py "$config" --device "$DEV" \
    --json --warmup "$WARMUP" "$@" >"$LOGS/$name.log" 2>&1
  rc=$?
  stop_smi
  say "$name: exit $rc in $((SECONDS - started)) s"
  return $rc
}

# --- stages ----------------------------------------------------------------------------------

build_stage() {
  if [ -n "${VESCALE_TRAIN:-}" ]; then
    if [ -x "$BIN" ]; then
      BUILD_ROWS+=("build: skipped (VESCALE_TRAIN=$VESCALE_TRAIN)")
      tally skipped
    else
      BUILD_ROWS+=("build: FAIL: VESCALE_TRAIN=$VESCALE_TRAIN is no executable ($BIN)")
      tally FAIL
      BUILD_FAILED=1
    fi
    return
  fi
  if [ $MODE = cpu ]; then
    if [ -x "$BIN" ]; then
      BUILD_ROWS+=("build: skipped ($BIN exists)")
      tally skipped
      return
    fi
    # A fresh build takes ~20 minutes on 2 cores. The deadline budgets the GPU machine's one call,
    # so on the CPU it counts from after the build.
    local started=$SECONDS
    BUILD_LIMIT=7200 build_and_report "scripts/build.sh" scripts/build.sh
    DEADLINE=$((DEADLINE + SECONDS - started)) END=$((END + SECONDS - started))
    return
  fi
  local started=$SECONDS
  # Release, and vescale-train only: the tests and benches would double the build's time.
  BUILD_DIR=build-cuda BUILD_TYPE=Release timeout "$(limit 240)" scripts/setup-cuda.sh --configure-only \
    -DVESCALE_BUILD_TESTS=OFF -DVESCALE_BUILD_BENCH=OFF >"$LOGS/configure.log" 2>&1
  local rc=$?
  local facts
  facts=$(grep -m1 -o 'vescale-train:.*' "$LOGS/configure.log")
  say "configure: exit $rc in $((SECONDS - started)) s; ${facts:-no vescale-train: line}"
  if [ $rc != 0 ]; then
    tail -5 "$LOGS/configure.log" | sed 's/^/    /'
    BUILD_ROWS+=("build: FAIL: scripts/setup-cuda.sh --configure-only exit $rc: $(tail -1 "$LOGS/configure.log")")
    tally FAIL
    BUILD_FAILED=1
    return
  fi
  build_and_report "configure $((SECONDS - started)) s; $facts" \
    cmake --build build-cuda --target vescale-train -j "$(nproc)"
}

# warning_sites LOG: "-Wflag at lib/x.cpp:12, ..." for the warnings of a build log: each one's
# last line of this tree among the lines that lead to it (up to 5 sites).
warning_sites() {
  python3 - "$1" "$PWD" <<'PY'
import re, sys
root = sys.argv[2].rstrip("/") + "/"
ours = re.compile(re.escape(root) + r"((?:lib|app|models|tests|plugins|bench)/[^:' ]+:\d+)")
sites, context = [], []
for line in open(sys.argv[1], errors="replace"):
    context.append(line)
    if "warning:" not in line:
        continue
    flag = re.search(r"\[(-W[^\]=]+)", line)
    found = [m.group(1) for l in context[-40:] for m in ours.finditer(l)]
    site = f"{flag.group(1) if flag else 'warning'} at {found[-1] if found else 'a library header'}"
    if site not in sites:
        sites.append(site)
    context = []
print(", ".join(sites[:5]))
PY
}

# build_and_report NOTE COMMAND...: builds, and makes the build row: time, warnings, last lines.
build_and_report() {
  local note=$1 started=$SECONDS rc warnings
  shift
  timeout "${BUILD_LIMIT:-$(limit 420)}" "$@" >"$LOGS/build.log" 2>&1
  rc=$?
  warnings=$(grep -c 'warning:' "$LOGS/build.log")
  # Where each warning comes from in this tree (a warning inside a library header names the
  # line of ours that inlined it), so that a GPU machine's compiler names its sites.
  local sites
  sites=$(warning_sites "$LOGS/build.log")
  [ -n "$sites" ] && warnings="$warnings ($sites)"
  say "build: exit $rc in $((SECONDS - started)) s, $warnings warnings; its last lines:"
  tail -3 "$LOGS/build.log" | sed 's/^/    /'
  if [ $rc = 0 ] && [ -x "$BIN" ]; then
    BUILD_ROWS+=("build: ok in $((SECONDS - started)) s, $warnings warnings ($note)")
    tally ok
  else
    grep -m5 'error' "$LOGS/build.log" | sed 's/^/    /'
    BUILD_ROWS+=("build: FAIL (exit $rc, $warnings warnings; $note): $(grep -m1 'error' "$LOGS/build.log")")
    tally FAIL
    BUILD_FAILED=1
  fi
}

# parity_row NAME BAR FIGURE STATUS: ok when the figure was computed (STATUS 0) and is within BAR.
parity_row() {
  local name=$1 bar=$2 figure=$3 status=$4 verdict=FAIL
  if [ "$status" = 0 ] && python3 -c 'import sys; sys.exit(float(sys.argv[1]) > float(sys.argv[2]))' \
    "$figure" "$bar"; then
    verdict=ok
  fi
  PARITY_ROWS+=("| $name | $figure | $bar | $verdict |")
  PARITY_VERDICT=$verdict
  tally $verdict
  say "parity: $name: $figure (bar $bar): $verdict"
}

# compare NAME BAR REF RUN [FIRST COUNT]: a parity row from two runs' metrics (both must have run).
compare() {
  local name=$1 bar=$2 ref=$3 run=$4 first=${5:-1} count=${6:-20} figure status
  figure=$(max_relative "$ref" "$run" "$first" "$count")
  status=$?
  local side
  for side in "$ref" "$run"; do
    if [ -n "${RUN_FAILED[$side]:-}" ]; then
      figure=$(why_failed "$side")
      status=1
    fi
  done
  parity_row "$name" "$bar" "$figure" $status
  [ "$PARITY_VERDICT" = ok ] && VERIFIED_RUNS+=("$run")
  return 0
}

write_parity_configs() {
  cat >"$LOGS/small.toml" <<'EOF'
# gpu-check's parity job: a small GPT with dropout (vescale's masks do not depend on the device)
[job]
name = "gpu-check-parity"
[model]
name = "gpt"
vocab_size = 256
block_size = 64
n_layer = 2
n_head = 4
n_embd = 64
dropout = 0.1
[parallel]
dp = 1
tp = 1
[data]
source = "synthetic"
[training]
steps = 20
global_batch_size = 8
seq_len = 64
seed = 3
[optimizer]
lr = 3e-3
[eval]
interval = 10
windows = 4
[metrics]
log_interval = 1
EOF
  # Llama: grouped-query attention (2 key/value heads for 4), no dropout in that family.
  sed -e 's/^name = "gpt"$/name = "llama"\nn_kv_head = 2/' -e '/^dropout/d' \
    -e 's/^# gpu-check.*/# gpu-check'"'"'s parity job: a small Llama/' "$LOGS/small.toml" >"$LOGS/llama.toml"
  # Mixtral: Llama's attention, each layer's MLP 4 SwiGLU experts, 2 a token (a float32 router).
  sed -e 's/^name = "gpt"$/name = "mixtral"\nn_kv_head = 2\nintermediate_size = 96\nnum_experts = 4\nexperts_per_token = 2/' \
    -e '/^dropout/d' -e 's/^# gpu-check.*/# gpu-check'"'"'s parity job: a small Mixtral/' \
    "$LOGS/small.toml" >"$LOGS/mixtral.toml"
}

parity_stage() {
  write_parity_configs
  local small=$LOGS/small.toml llama=$LOGS/llama.toml mixtral=$LOGS/mixtral.toml
  local f64=(--training.dtype=float64) f32=(--training.dtype=float32)
  vrun cpu64 120 "$small" --training.device=cpu "${f64[@]}"
  vrun dev64 120 "$small" --training.device=$DEV "${f64[@]}" --checkpoint.interval=10 \
    --checkpoint.keep=0
  compare "gpt float64, $SIDE vs cpu (loss, val_loss, 20 steps)" 1e-10 cpu64 dev64
  vrun cpu32 120 "$small" --training.device=cpu "${f32[@]}"
  vrun dev32 120 "$small" --training.device=$DEV "${f32[@]}"
  compare "gpt float32, $SIDE vs cpu" 1e-4 cpu32 dev32
  local bf16=(--training.dtype=bfloat16) unverified=(--training.unverified_kernels=true)
  vrun devbf16 120 "$small" --training.device=$DEV "${bf16[@]}"
  compare "gpt bf16 on $SIDE vs float32 on cpu" 2e-2 cpu32 devbf16
  # Every CUDA kernel row, those no GPU has run too (NOTE [GPU-verified]).
  vrun devbf16_unverified 120 "$small" --training.device=$DEV "${bf16[@]}" "${unverified[@]}"
  compare "gpt bf16 on $SIDE, unverified kernel rows taken, vs float32 on cpu" 2e-2 cpu32 \
    devbf16_unverified
  vrun dev32_unverified 120 "$small" --training.device=$DEV "${f32[@]}" "${unverified[@]}"
  compare "gpt float32 on $SIDE, unverified kernel rows taken, vs cpu" 1e-4 cpu32 \
    dev32_unverified
  vrun llama_cpu64 120 "$llama" --training.device=cpu "${f64[@]}"
  vrun llama_dev64 120 "$llama" --training.device=$DEV "${f64[@]}"
  compare "llama float64, $SIDE vs cpu" 1e-10 llama_cpu64 llama_dev64
  vrun llama_cpu32 120 "$llama" --training.device=cpu "${f32[@]}"
  vrun llama_devbf16 120 "$llama" --training.device=$DEV "${bf16[@]}"
  compare "llama bf16 on $SIDE vs float32 on cpu" 2e-2 llama_cpu32 llama_devbf16
  # With every CUDA row, our SwiGLU kernel (NOTE [CUDA kernels]) among them.
  vrun llama_devbf16_unverified 120 "$llama" --training.device=$DEV "${bf16[@]}" "${unverified[@]}"
  compare "llama bf16 on $SIDE, unverified kernel rows taken, vs float32 on cpu" 2e-2 \
    llama_cpu32 llama_devbf16_unverified
  vrun mixtral_cpu32 120 "$mixtral" --training.device=cpu "${f32[@]}"
  vrun mixtral_devbf16 120 "$mixtral" --training.device=$DEV "${bf16[@]}"
  compare "mixtral bf16 on $SIDE vs float32 on cpu" 2e-2 mixtral_cpu32 mixtral_devbf16
  # With every CUDA row, our grouped GEMM for the experts (NOTE [Grouped experts]) among them.
  vrun mixtral_devbf16_unverified 120 "$mixtral" --training.device=$DEV "${bf16[@]}" \
    "${unverified[@]}"
  compare "mixtral bf16 on $SIDE, unverified kernel rows taken, vs float32 on cpu" 2e-2 \
    mixtral_cpu32 mixtral_devbf16_unverified
  vrun mixtral_dev32_unverified 120 "$mixtral" --training.device=$DEV "${f32[@]}" \
    "${unverified[@]}"
  compare "mixtral float32 on $SIDE, unverified kernel rows taken, vs cpu" 1e-4 mixtral_cpu32 \
    mixtral_dev32_unverified

  # Several ranks over Gloo (the wheel ships Gloo inside libtorch_cpu and no headers: NOTE [Gloo
  # headers] in scripts/fetch-cuda-deps.sh): dp 2 on 2 CPU processes gives the 1-process losses.
  vrun gloo_dp2 120 "$small" --training.device=cpu "${f64[@]}" --parallel.dp=2 --nproc 2
  compare "gloo: gpt float64, dp 2 on 2 processes vs 1 process" 1e-10 cpu64 gloo_dp2

  # The $SIDE run's step-10 checkpoint, resumed on the CPU, must continue as the CPU run did.
  local ckpt=$SCRATCH/dev64/checkpoints/step-000010
  vrun resume_cpu64 120 "$small" --training.device=cpu "${f64[@]}" --checkpoint.load="$ckpt"
  compare "resume: gpt float64 $SIDE step-10 checkpoint on cpu, steps 11-20 vs cpu" 1e-10 \
    cpu64 resume_cpu64 11 10

  # eval of that checkpoint on $SIDE gives the run's own val_loss at step 10.
  local on_dev=(--training.device="$DEV" "${f64[@]}" --checkpoint "$ckpt")
  timeout -k 10 "$(limit 60)" "$BIN" eval "$small" --job.dump_folder="$SCRATCH/eval" "${on_dev[@]}" \
    >"$LOGS/eval.log" 2>&1
  local rc=$? figure status
  figure=$(val_loss_relative dev64 10 "$LOGS/eval.log")
  status=$?
  [ $rc = 0 ] || { figure="eval exit $rc"; status=1; }
  parity_row "eval on $SIDE of that checkpoint vs the run's val_loss at step 10" 1e-10 "$figure" $status

  # Greedy generation from it: the same 16 tokens on $SIDE and on the CPU.
  local prompt=(--prompt-ids "1,2,3" --max-new-tokens 16 --greedy)
  timeout -k 10 "$(limit 60)" "$BIN" generate "$small" --job.dump_folder="$SCRATCH/gen" \
    "${on_dev[@]}" "${prompt[@]}" >"$LOGS/generate_dev.out" 2>"$LOGS/generate_dev.log"
  local rc_dev=$?
  timeout -k 10 "$(limit 60)" "$BIN" generate "$small" --job.dump_folder="$SCRATCH/gen" \
    --training.device=cpu "${f64[@]}" --checkpoint "$ckpt" "${prompt[@]}" \
    >"$LOGS/generate_cpu.out" 2>"$LOGS/generate_cpu.log"
  local rc_cpu=$?
  figure=$(python3 - "$LOGS/generate_dev.out" "$LOGS/generate_cpu.out" <<'PY'
import sys
dev, cpu = (open(p).read().split() for p in sys.argv[1:])
if len(dev) != 19 or len(cpu) != 19:  # the 3 prompt ids and 16 new ones
    print(f"{len(dev)} and {len(cpu)} ids, not 19")
    sys.exit(1)
print(sum(a != b for a, b in zip(dev, cpu)))
PY
  )
  status=$?
  if [ $rc_dev != 0 ] || [ $rc_cpu != 0 ]; then
    figure="generate exit $rc_dev ($SIDE), $rc_cpu (cpu)"
    status=1
  fi
  parity_row "greedy generate of 16 tokens from it, $SIDE vs cpu: tokens that differ" 0 "$figure" $status
  kernel_rows
}

# ranks_stage: the layouts with several ranks sharing the GPU, over Gloo with CUDA tensors (NOTE
# [Ranks sharing a GPU], NOTE [Gloo with CUDA tensors]), each against the CPU's 1-process run.
ranks_stage() {
  if [ $MODE = cpu ] && [ -z "${RANKS_ON_CPU:-}" ]; then
    STAGE_ROWS+=("ranks: skipped: --cpu (ranks sharing a GPU need one; the CPU's tests run these layouts over Gloo)")
    tally skipped
    say "skipped ranks: --cpu"
    return
  fi
  write_parity_configs
  local small=$LOGS/small.toml llama=$LOGS/llama.toml mixtral=$LOGS/mixtral.toml
  # Ranks sharing a GPU take Gloo with CUDA tensors, GPU code until a run verifies it (NOTE
  # [GPU-verified]): opted in, as the unverified kernel rows are.
  local ten=(--training.steps=10 --eval.interval=5 --training.unverified_kernels=true)
  local f64=(--training.dtype=float64)
  local sp=(--parallel.plan=gpt/megatron-sp)
  vrun ranks_cpu64 120 "$small" --training.device=cpu "${f64[@]}" "${ten[@]}"
  vrun ranks_cpu32 120 "$small" --training.device=cpu --training.dtype=float32 "${ten[@]}"
  vrun ranks_llama_cpu64 120 "$llama" --training.device=cpu "${f64[@]}" "${ten[@]}"
  vrun ranks_mixtral_cpu64 120 "$mixtral" --training.device=cpu "${f64[@]}" "${ten[@]}"
  # row NAME CONFIG REF NPROC ARGS...: NAME's run with NPROC ranks on $DEV against REF (1e-10).
  row() {
    local name=$1 config=$2 ref=$3 nproc=$4
    shift 4
    vrun "$name" 180 "$config" --training.device=$DEV "${f64[@]}" "${ten[@]}" --nproc "$nproc" "$@"
    compare "ranks: $name, $nproc ranks on $SIDE over Gloo, float64 vs cpu 1 process (${RUN_SECONDS[$name]:-?} s)" \
      1e-10 "$ref" "$name" 1 10
  }
  row ranks_dp2tp2_sp "$small" ranks_cpu64 4 --parallel.dp=2 --parallel.tp=2 "${sp[@]}" \
    --checkpoint.interval=5 --checkpoint.keep=0
  row ranks_pp2dp2_1f1b "$small" ranks_cpu64 4 --parallel.pp=2 --parallel.dp=2 \
    --parallel.microbatches=2 --parallel.pp_schedule=1f1b
  row ranks_dp2_zero3 "$small" ranks_cpu64 2 --parallel.dp=2 --parallel.zero=3
  row ranks_cp2tp2 "$small" ranks_cpu64 4 --parallel.cp=2 --parallel.tp=2 "${sp[@]}"
  row ranks_mixtral_ep2dp2 "$mixtral" ranks_mixtral_cpu64 2 --parallel.dp=2 --parallel.ep=2
  row ranks_llama_tp2 "$llama" ranks_llama_cpu64 2 --parallel.tp=2 \
    --parallel.plan=llama/megatron-tp
  # The dp2 x tp2 run's sharded step-5 checkpoint, on the CPU at 1 process: steps 6-10 as the CPU's.
  vrun ranks_resume_cpu64 120 "$small" --training.device=cpu "${f64[@]}" "${ten[@]}" \
    --checkpoint.load="$SCRATCH/ranks_dp2tp2_sp/checkpoints/step-000005"
  compare "ranks: the dp2 x tp2 run's $SIDE step-5 checkpoint resumed on cpu at 1 process, steps 6-10 vs cpu (${RUN_SECONDS[ranks_resume_cpu64]:-?} s)" \
    1e-10 ranks_cpu64 ranks_resume_cpu64 6 5
  vrun ranks_dp2tp2_bf16 180 "$small" --training.device=$DEV --training.dtype=bfloat16 "${ten[@]}" \
    --nproc 4 --parallel.dp=2 --parallel.tp=2 "${sp[@]}"
  compare "ranks: dp2 x tp2 bf16, 4 ranks on $SIDE over Gloo, vs float32 on cpu (${RUN_SECONDS[ranks_dp2tp2_bf16]:-?} s)" \
    2e-2 ranks_cpu32 ranks_dp2tp2_bf16 1 10
}

# kernel_rows: the kernel table's rows that the passing device-side runs took (their `[kernels]`
# lines), and for each CUDA row of the binary (its --version) whether one of them took it. On a GPU
# a row that the binary says is "not yet run on a GPU" and a passing run took is verified now:
# the line to write into its row is printed (NOTE [GPU-verified]).
kernel_rows() {
  local taken
  taken=$(for run in ${VERIFIED_RUNS[@]+"${VERIFIED_RUNS[@]}"}; do
    [[ $run == dev* || $run == *_dev* ]] || continue  # the device side only
    sed -n 's/.*\[kernels\] rank 0 took: //p' "$LOGS/$run.log"
  done | tr ',' '\n' | sed 's/^ *//' | grep -v '^$' | sort -u | paste -sd ',' | sed 's/,/, /g')
  KERNEL_ROWS+=("kernels: rows the passing $SIDE runs took: ${taken:-none}")
  local row name state verified=() unverified_now=() missed=()
  while IFS= read -r row; do
    name=$(sed -E 's/^  [^:]+: (.+): CUDA.*/\1/' <<<"$row")  # at::linear has colons
    state=$(sed -E 's/.*CUDA, //' <<<"$row")
    if [[ ", $taken, " == *", $name, "* ]]; then
      [[ $state == *"not yet run on a GPU"* ]] && unverified_now+=("$name") || verified+=("$name")
    else
      missed+=("$name")
    fi
  done < <("$BIN" --version 2>/dev/null | grep -E '^  [^:]+: .+: CUDA')
  if [ $MODE = gpu ]; then
    local today gpu
    today=$(date -u +%F)
    gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
    KERNEL_ROWS+=("kernels: CUDA rows verified again: $(IFS=,; echo "${verified[*]:-none}" | sed 's/,/, /g')")
    KERNEL_ROWS+=("kernels: CUDA rows verified for the first time: $(IFS=,; echo "${unverified_now[*]:-none}" | sed 's/,/, /g')${unverified_now[*]:+ (write {\"$today\", \"$gpu\"} as their gpu_run in lib/kernels/kernel_table.cpp)}")
    KERNEL_ROWS+=("kernels: CUDA rows no passing run took: $(IFS=,; echo "${missed[*]:-none}" | sed 's/,/, /g')")
  else
    KERNEL_ROWS+=("kernels: CUDA rows (--cpu: none taken here): $(IFS=,; echo "${missed[*]:-none}" | sed 's/,/, /g')")
  fi
}

bench_stage() {
  local config=configs/gpt2-124m.toml
  if [ $MODE = cpu ]; then
    config=$LOGS/bench-small.toml
    write_small_bench_config "$config"
  fi
  local flops peak tokens dtype
  read -r flops peak < <(model_flops "$config")
  read -r tokens dtype < <(python3 -c 'import sys, tomllib
t = tomllib.load(open(sys.argv[1], "rb"))["training"]
print(t["global_batch_size"] * t["seq_len"], t.get("dtype", "float32"))' "$config")
  BENCH_TITLE="$(basename "$config" .toml) $dtype, $tokens tokens a step, $BENCH_STEPS steps, medians after step $WARMUP"
  local steps=(--training.steps="$BENCH_STEPS")

  bench_vescale bench_vescale "vescale-train" "$config" "$tokens" "$flops" "$peak" "${steps[@]}"
  # vescale-train's own MFU from the peak it finds for the device (NOTE [MFU peak]; opted in
  # while no GPU has run that code, NOTE [GPU-verified]), a few steps past the warm-up.
  if may_start "mfu check"; then
    vrun mfu_check 240 "$config" --training.steps=$((WARMUP + 5)) --metrics.peak_flops=0 \
      --training.unverified_kernels=true
    mfu_row mfu_check "$flops" "$peak"
  else
    MFU_ROWS+=("mfu: skipped: past the deadline")
    tally skipped
  fi
  # The same without NOTE [Fused LM loss] and NOTE [Fused projections]: their gain in this run.
  bench_vescale bench_vescale_unfused "vescale-train (unfused)" "$config" "$tokens" "$flops" \
    "$peak" "${steps[@]}" --training.fused_loss=false --training.fused_projections=false
  bench_peer torch-eager "$config" "$flops" "$peak" "${steps[@]}"
  bench_peer torch-compile "$config" "$flops" "$peak" "${steps[@]}" --compile
  bench_llama
}

# bench_llama: configs/llama-1b.toml on one GPU (1.1B parameters, 22 layers, GQA 32/4 heads, batch
# 4 x 2048, bf16, synthetic tokens), its MFU as its metrics count it (NOTE [MFU peak]) against
# 989 TFLOP/s, the dense bf16 peak of an H100 SXM and an H200; --cpu: configs/llama-tiny.toml.
bench_llama() {
  local config=configs/llama-1b.toml batch=4 seq=2048 peak=989e12
  [ $MODE = cpu ] && config=configs/llama-tiny.toml batch=4 seq=64 peak=0
  local who="vescale-train $(basename "$config" .toml) B${batch}×$seq"
  bench_vescale bench_llama "$who" "$config" $((batch * seq)) 0 0 --training.steps="$BENCH_STEPS" \
    --parallel.dp=1 --parallel.tp=1 --parallel.zero=0 --parallel.microbatches=1 \
    --parallel.plan=llama/dp-only --training.global_batch_size=$batch --training.seq_len=$seq \
    --data.source=synthetic --training.device="$DEV" --metrics.peak_flops=$peak \
    --metrics.log_interval=1 --checkpoint.interval=0 --eval.interval=0 --eval.windows=1
}

# mfu_row RUN FLOPS_PER_TOKEN CONFIG_PEAK: vescale-train's MFU in RUN's metrics.jsonl against this
# script's count (FLOPS_PER_TOKEN at the line's own tokens/s) over the peak it expects: on an
# H100 SXM or H200 the config's metrics.peak_flops (their dense bf16 figure), else the peak the
# run said it used (its `[mfu]` line), which then checks the FLOP count only.
mfu_row() {
  local run=$1 flops=$2 config_peak=$3 said expected source figure status verdict=FAIL
  if [ ! -f "$LOGS/$run.log" ]; then
    MFU_ROWS+=("mfu: skipped: vescale-train's bench row did not run")
    tally skipped
    return
  fi
  if [ -n "${RUN_FAILED[$run]:-}" ] || [ ! -f "$LOGS/$run.jsonl" ]; then
    MFU_ROWS+=("mfu: FAIL: $(why_failed "$run")")
    tally FAIL
    return
  fi
  said=$(sed -n 's/.*\[mfu\] peak \([0-9.e+-]*\) TFLOP\/s per rank: \(.*\)/\1|\2/p' "$LOGS/$run.log" | head -1)
  expected="${said%%|*}e12" source="vescale-train's own peak (${said#*|})"
  if [ $MODE = gpu ] && [[ $config_peak != 0* ]] &&
    [[ $GPU_NAME =~ H100\ 80GB\ HBM3|H200$ ]]; then
    expected=$config_peak source="the config's metrics.peak_flops, $GPU_NAME's dense bf16"
  fi
  if [ -z "$said" ]; then
    figure="no [mfu] line in $run.log" status=1
  else
    figure=$(python3 - "$LOGS/$run.jsonl" "$flops" "$expected" "$WARMUP" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
flops, peak, warmup = float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
pairs = [(100 * r["mfu"], 100 * flops * r["tokens_per_s"] / peak) for r in rows if r["step"] > warmup]
if not pairs:
    sys.exit(print("no steps to compare") or 1)
worst = max(abs(a - b) for a, b in pairs)
print(f"{pairs[-1][0]:.2f}% vs {pairs[-1][1]:.2f}%, at most {worst:.2f} points apart")
sys.exit(worst > 1.0)
PY
    )
    status=$?
  fi
  [ $status = 0 ] && verdict=ok
  local hint=""
  # NOTE [GPU-verified]: a GPU that passed with the device table's figure verifies that code.
  if [ $MODE = gpu ] && [ $verdict = ok ] && [[ $said == *datasheet* ]]; then
    hint=" (the device table ran: write {\"$(date -u +%F)\", \"$GPU_NAME\"} as kDevicePeakRun in lib/train/peak_flops.cpp)"
  fi
  MFU_ROWS+=("mfu: vescale-train's metrics.jsonl vs 6N + 12LCT over $source: $figure (bar 1 point): $verdict$hint")
  tally $verdict
  say "mfu: $figure: $verdict"
}

# kernels_stage: the kernel table's rows on CUDA against the CPU's explicit rows
# (tests/kernels/kernel_table_test.cpp's KernelTableOnCuda) and our CUDA kernels at the shapes and
# inputs the table's test never gives them (tests/kernels/cuda_kernels_test.cpp), a process a
# kernel (NOTE [Kernel tests a process each]) under CUDA_LAUNCH_BLOCKING=1: a sticky CUDA error
# fails its kernel's row and names it, and the next kernel still runs. A row a case with its error;
# then vescale-kernel-speed (bench/kernel_speed.cpp): each of our rows against its fallback,
# forward and backward, with a rate and whether it may be verified. On the GPU machine the test
# binary is built in build-cuda from those two files alone (VESCALE_TEST_FILES: a minute, not the
# suite's ten); --cpu runs the build's own binaries, where the tests skip (no GPU) and the speed
# rows time the fallbacks alone, at small shapes.
KERNEL_GROUPS="Attention AdamW Linear MatmulPrecision LmLoss Swiglu Rotary AddNorm MoeExperts"
kernels_stage() {
  local build=build-cuda rc started=$SECONDS
  if [ $MODE = cpu ]; then
    build=$(dirname "$BIN")  # the build folder of the binary the other stages ran
  elif [ -d build-cuda ]; then
    timeout "$(limit 240)" bash -c 'cmake -S . -B build-cuda -DVESCALE_BUILD_TESTS=ON \
      -DVESCALE_BUILD_BENCH=ON \
      -DVESCALE_TEST_FILES="kernels/kernel_table_test.cpp;kernels/cuda_kernels_test.cpp" &&
      cmake --build build-cuda --target vescale_tests vescale-kernel-speed -j "$(nproc)"' \
      >"$LOGS/kernel_test_build.log" 2>&1
    rc=$?
    say "kernel test build: exit $rc in $((SECONDS - started)) s"
    if [ $rc != 0 ]; then
      KERNEL_TEST_ROWS+=("kernel test: FAIL: building the test binary: exit $rc: $(tail -1 "$LOGS/kernel_test_build.log")")
      tally FAIL
      return
    fi
  fi
  local tests=$build/tests/vescale_tests
  if [ ! -x "$tests" ]; then
    KERNEL_TEST_ROWS+=("kernel test: skipped: no test binary at $tests")
    tally skipped
    return
  fi
  local group filter log line cases
  for group in $KERNEL_GROUPS; do
    may_start "kernel test $group" || {
      KERNEL_TEST_ROWS+=("kernel test: $group: skipped: past the deadline (${DEADLINE} s)")
      tally skipped
      continue
    }
    # Our grouped GEMM's tests are the MoE experts table's kernel.
    filter="Tables/KernelTableOnCuda.EveryPathMatchesTheExplicitOne/$group"
    filter+=":CudaKernels.$([ "$group" = MoeExperts ] && echo GroupedGemm || echo "$group")*"
    log=$LOGS/kernel_test_$group.log
    CUDA_LAUNCH_BLOCKING=1 timeout -k 10 "$(limit 90)" "$tests" --gtest_filter="$filter" >"$log" 2>&1
    rc=$?
    cases=0
    while IFS= read -r line; do
      KERNEL_TEST_ROWS+=("kernel test: $line")
      cases=$((cases + 1))
    done < <(grep -E '^\[[^]]+\] .*(on cuda|max \|difference\||same bits|relative difference)' "$log")
    if grep -q '^\[  SKIPPED \]' "$log" && ! grep -q '^\[  PASSED  \] [1-9]' "$log"; then
      KERNEL_TEST_ROWS+=("kernel test: $group: skipped: $(grep -m1 -oE '(no GPU|built without)[^"]*' "$log" | cut -c1-80)")
      tally skipped
    elif [ $rc = 0 ]; then
      KERNEL_TEST_ROWS+=("kernel test: $group: $cases cases, each within its bar: ok")
      tally ok
    else
      KERNEL_TEST_ROWS+=("kernel test: $group: FAIL: exit $rc (logs/kernel_test_$group.log): $(grep -m1 -E 'Failure|CUDA error|illegal|terminate' "$log" | cut -c1-160)")
      tally FAIL
    fi
    say "kernel test $group: exit $rc, $cases cases"
  done
  kernel_speed "$build/vescale-kernel-speed"
}

# kernel_speed BINARY: vescale-kernel-speed's table (on --cpu: the fallbacks at small shapes).
kernel_speed() {
  local speed=$1 rc
  if [ ! -x "$speed" ]; then
    KERNEL_TEST_ROWS+=("kernel speed: skipped: no binary at $speed")
    tally skipped
    return
  fi
  may_start "kernel speed" || {
    KERNEL_TEST_ROWS+=("kernel speed: skipped: past the deadline (${DEADLINE} s)")
    tally skipped
    return
  }
  local args=(--device cuda)
  [ $MODE = cpu ] && args=(--device cpu --small)
  timeout -k 10 "$(limit 120)" "$speed" "${args[@]}" >"$LOGS/kernel_speed.log" 2>&1
  rc=$?
  if [ $rc = 0 ]; then
    KERNEL_TEST_ROWS+=("" "kernel speed ($speed ${args[*]}): our rows against the rows that run in their place" "")
    mapfile -t -O "${#KERNEL_TEST_ROWS[@]}" KERNEL_TEST_ROWS < <(grep '^|' "$LOGS/kernel_speed.log")
    tally ok
  else
    KERNEL_TEST_ROWS+=("kernel speed: FAIL: exit $rc (logs/kernel_speed.log): $(tail -1 "$LOGS/kernel_speed.log" | cut -c1-160)")
    tally FAIL
  fi
  say "kernel speed: exit $rc"
}

# bench_vescale RUN WHO CONFIG TOKENS FLOPS PEAK ARGS...: vescale-train's row WHO from run RUN of
# CONFIG with ARGS; skipped past the deadline.
bench_vescale() {
  local run=$1 who=$2 config=$3 tokens=$4 flops=$5 peak=$6 figures
  shift 6
  if ! may_start "bench $who"; then
    BENCH_ROWS+=("| $who | skipped: past the deadline |")
    tally skipped
    return
  fi
  if vrun "$run" 240 "$config" "$@" && figures=$(vescale_figures "$run" "$tokens" "$who"); then
    BENCH_ROWS+=("$(bench_row "$figures" "$(smi_max "$run")" "$flops" "$peak")")
    tally ok
  else
    BENCH_ROWS+=("| $who | FAIL: $(why_failed "$run") |")
    tally FAIL
  fi
}

# bench_peer WHO CONFIG FLOPS PEAK ARGS...: a peer's row; skipped, with the peer's reason, where
# this torch cannot (exit 2: no torch.compile, no GPU).
bench_peer() {
  local who=$1 config=$2 flops=$3 peak=$4 figures peer_flops
  shift 4
  if [ -z "$TORCH_PY" ]; then
    BENCH_ROWS+=("| $who | skipped: no python3 here imports torch (set PYTHON) |")
    tally skipped
    return
  fi
  if ! may_start "bench $who"; then
    BENCH_ROWS+=("| $who | skipped: past the deadline |")
    tally skipped
    return
  fi
  prun "bench_$who" "$config" "$@"
  local rc=$?
  figures=$(tail -1 "$LOGS/bench_$who.log")
  if [ $rc = 2 ]; then
    BENCH_ROWS+=("| $who | skipped: $(tail -1 "$LOGS/bench_$who.log" | sed 's/^\[peer\] //') |")
    tally skipped
  elif [ $rc != 0 ] || [[ $figures != "{"* ]]; then
    BENCH_ROWS+=("| $who | FAIL: exit $rc: $(tail -1 "$LOGS/bench_$who.log") |")
    tally FAIL
  else
    # The peer must be the model vescale-train trains: the same FLOPs per token, hence parameters.
    peer_flops=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["flops_per_token"])' "$figures")
    if [ "$peer_flops" = "$flops" ]; then
      BENCH_ROWS+=("$(bench_row "$figures" "$(smi_max "bench_$who")" "$flops" "$peak")")
      tally ok
    else
      BENCH_ROWS+=("| $who | FAIL: not the same model: $peer_flops FLOPs per token, the config's $flops |")
      tally FAIL
    fi
  fi
}

write_small_bench_config() {
  cat >"$1" <<'EOF'
# gpu-check --cpu's bench job: a small GPT that a CPU steps in well under a second
[job]
name = "gpu-check-bench"
[model]
name = "gpt"
vocab_size = 256
block_size = 128
n_layer = 2
n_head = 4
n_embd = 128
dropout = 0.0
[parallel]
dp = 1
tp = 1
[data]
source = "synthetic"
[training]
steps = 6
global_batch_size = 4
seq_len = 128
seed = 1
device = "cpu"
dtype = "float32"
grad_clip = 1.0
[optimizer]
name = "adamw"
lr = 6e-4
beta2 = 0.95
weight_decay = 0.1
[eval]
interval = 0
windows = 1
[metrics]
log_interval = 1
EOF
}

profile_stage() {
  local config=configs/gpt2-124m.toml
  [ $MODE = cpu ] && config=$LOGS/bench-small.toml && write_small_bench_config "$config"
  local trace=$SCRATCH/profile/trace.json bytes phases kernels verdict=ok note=""
  vrun profile 180 "$config" --training.steps=$PROFILE_STEPS --profile 3-3
  local rc=$?
  if [ $rc != 0 ] || [ ! -f "$trace" ]; then
    PROFILE_ROWS+=("profile: FAIL: train --profile 3-3 exit $rc$([ -f "$trace" ] || echo ", no trace.json")")
    tally FAIL
    return
  fi
  cp "$trace" "$LOGS/profile.trace.json"
  read -r bytes phases kernels < <(trace_counts "$trace")
  ((phases > 0)) || { verdict=FAIL; note=" (no phases)"; }
  if [ $MODE = gpu ]; then
    ((kernels > 0)) || { verdict=FAIL; note+=" (no CUDA kernels)"; }
  else
    note+=" (no kernels expected on the CPU)"
  fi
  PROFILE_ROWS+=("profile: trace.json $((bytes / 1024)) KiB, $phases phase events, $kernels kernel events$note: $verdict")
  tally $verdict
  # The step's GPU busy time (the rest is the device waiting for the host) and its top kernels.
  local line
  while IFS= read -r line; do
    PROFILE_ROWS+=("profile: $line")
  done < <(python3 scripts/lib/trace_summary.py "$trace" --top 12 2>&1)
}

# --- main ------------------------------------------------------------------------------------

# The Python the peers run under: the first that imports torch (its versions go in the header).
TORCH_PY="" TORCH_VERSIONS=""
for candidate in ${PYTHON:-} python3 /usr/bin/python3; do
  if TORCH_VERSIONS=$("$candidate" -c 'import sys, torch
print(torch.__version__, "CUDA", torch.version.cuda, "python", sys.version.split()[0])' 2>/dev/null); then
    TORCH_PY=$candidate
    break
  fi
done

machine_line() {
  local cpu
  cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
  if [ $MODE = gpu ]; then
    local gpus
    gpus=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader)
    echo "machine: $(wc -l <<<"$gpus") x $(head -1 <<<"$gpus"); $cpu, $(nproc) cores"
  else
    echo "machine: $cpu, $(nproc) cores (--cpu: no GPU used)"
  fi
}

torch_line() {
  if [ -n "$TORCH_PY" ]; then
    echo "torch: $TORCH_VERSIONS ($TORCH_PY)"
  else
    echo "torch: none (no python3 here imports torch; PYTHON names one)"
  fi
}

RESULTS="" GPU_NAME=""
if [ $MODE = gpu ]; then
  GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
  RESULTS=bench/results/$(gpu_short_name "$GPU_NAME")-$(date -u +%F).txt
fi

HEADER=("gpu-check $(date -u '+%F %H:%M UTC')" "$(machine_line)" "$(torch_line)"
  "vescale-train: (no binary)" "command: $COMMAND")
say "mode $MODE, stages $STAGES, out folder $OUT_DIR"

if wanted build; then
  say "== build"
  build_stage
else
  BUILD_ROWS+=("build: not asked for (--stages); binary $BIN")
fi
if [ -x "$BIN" ] && [ $BUILD_FAILED = 0 ]; then
  HEADER[3]="vescale-train: $("$BIN" --version 2>&1 | head -2 | paste -sd ' ' | cut -c1-300)"
fi
publish

for stage in parity ranks kernels bench profile; do
  wanted $stage || continue
  # A binary left by an earlier build is not what this tree builds: no stage runs it.
  why=""
  [ -x "$BIN" ] || why="no vescale-train binary at $BIN"
  [ -z "$why" ] && [ $BUILD_FAILED = 1 ] && why="the build failed"
  if [ -n "$why" ]; then
    say "skipped $stage: $why"
    STAGE_ROWS+=("$stage: skipped: $why")
    tally skipped
    continue
  fi
  # The bench decides per row (each 124M run is the long part), the others as a whole.
  if [ $stage != bench ] && ! may_start "$stage"; then
    STAGE_ROWS+=("$stage: skipped: past the deadline (${DEADLINE} s)")
    tally skipped
    continue
  fi
  say "== $stage"
  "${stage}_stage"
  publish
done

publish
table
say "table: $OUT_DIR/table.txt${RESULTS:+, $RESULTS}${OUT:+, $OUT}"
[ $FAILED = 0 ]
