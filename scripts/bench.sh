#!/usr/bin/env bash
# Benchmarks, each printing a table:
#   0. peers: the same GPT (configs/gpt-tiny.toml at seq_len = block_size = 128, global batch 16,
#      $PEER_STEPS steps) in today's PyTorch (python/requirements.txt's wheel, 2.11, through
#      bench/peers/gpt_torch.py): eager and torch.compile on 1 process, DDP, FSDP2 (fully_shard)
#      and DTensor tensor parallelism (Megatron colwise/rowwise + sequence parallel) on 2; against
#      vescale-train on Debian's LibTorch 1.13 (OpenBLAS) and on the wheel's LibTorch 2.11 (MKL)
#      at 1 process, dp=2, dp=2 ZeRO-3 and tp=2; float32, and bf16 (1 process) where the CPU has
#      AVX512-BF16 or AMX; and a plain LibTorch loop (vescale-bench-plain: no DTensor, no hooks).
#      Tokens/s after the first step and the peak resident memory of the process tree (the
#      largest process), median (min-max) of $PEER_ROUNDS rounds that run every row once, in turn;
#      vescale's ratios to the matching peer as the median of the per-round ratios (rows of one
#      round share the machine's state), every row's runs listed under the table. Peers run with
#      their fastest thread settings (the candidates in $PEER_1_ENVS and $PEER_2_ENVS; the peer
#      rows of 2022's Debian PyTorch 1.13 are BENCH=peer-threads'), vescale-train with its own
#      defaults (no thread variables set);
#   1. collectives over every mesh dim (comm bench) on 2 and 4 local processes;
#   2. training throughput of configs/gpt-tiny.toml (float32, 60 steps) on 1 process and on the
#      config's dp=2 x tp=2 mesh;
#   3. pipeline schedules: gpt-tiny at pp=2 (30 steps) for each schedule and 4, 8, 16
#      micro-batches: tokens/s, the bubble each rank measured (time waiting for the other stage
#      over step time) next to the schedule's simulated/analytic bubble, and each rank's peak
#      resident memory and peak micro-batches in flight;
#   4. ZeRO: gpt-tiny at dp=2 and dp=4 (tp=1) for parallel.zero = 0, 1, 2, 3 (30 steps): tokens/s,
#      rank 0's parameters / gradients / optimizer state after a step (from tensor sizes), its
#      peak resident memory, and the dp bytes per step by kind;
#   5. checkpoints: a GPT of about 300 MB of state (n_embd 512, 8 blocks, AdamW) on tp=2, saved
#      sharded and merged, sync and async: the training stall per checkpoint (time the training
#      thread spent in the save), the write throughput (the step folder's bytes over the time from
#      the first file opened to COMMIT, files fsynced), `dd conv=fsync` of as many bytes into the
#      same folder, their ratio, and rank 0's peak resident memory.
#   6. export: a 125M-parameter Llama checkpoint exported as a Hugging Face folder in float32 and
#      bfloat16: bytes, seconds, MB/s and the exporter's peak resident memory.
#   7. recompute: activation checkpointing none / selective / full on 1 process for gpt-tiny and
#      a GPT of 8 blocks, C = 256, T = 512: the activation bytes metrics report, the median step
#      time, each against none, and the peak resident memory.
#   8. cp: context parallelism at T = 1024 (gpt-tiny's model, 2 sequences a step) on cp = 1, 2
#      and 4 processes: tokens/s, rank 0's activation bytes against cp = 1, the bytes it sent
#      over cp in a step against the ring formula plan lint states, and its peak resident memory.
#   9. generate: 256 new tokens (greedy, 1 process) from gpt-tiny trained 200 steps and from a GPT
#      of 8 blocks, C = 256, block_size 512 (one step trained: its speed, not its text), with and
#      without the KV cache: tokens/s, the mean time of a step in the first and the last quarter
#      of the steps, the time to the first token, and the context restarts.
#  10. flight: what the flight recorder costs (NOTE [Flight recorder]): ns a call
#      (vescale-bench-flight), the calls of a step on each rank of gpt-dp2-tp2 and pp 2 x tp 2
#      (from their dumps after step 20), their share of the step time, and tokens/s with the
#      recorder on (4096 entries) and off (0), 3 alternating rounds each.
#  11. fused: gpt-tiny's model at T = 128 on 1 process at vocabularies 256 and 50,304 with the
#      fused LM loss and the fused projections each on and off: tokens/s (3 alternating rounds),
#      the activation bytes metrics report, peak resident memory.
#  12. moe: configs/mixtral-tiny.toml with 8 experts, top-2, against the dense Llama of the same
#      active parameters (configs/llama-tiny.toml's SwiGLU of 2 x 172, tp = 1), 40 steps, on 1
#      process, dp = 2 and (MoE) dp = 2 with ep = 2: tokens/s (median after the first step),
#      rank 0's parameter bytes, the bytes it sent over ep and dp in a step, peak resident memory.
#  13. optimizer: the optimizer phase of GPT-2 124M (configs/gpt2-124m.toml at 1 x 32 tokens a
#      step, so that the phase is a large part of the step) in float32 and bf16 on 1 process: the
#      median of steps 3-6 of its `opt` time (NOTE [Step anatomy]), of the step, and the state
#      bytes; OLD_TRAIN=<binary> adds that binary's rows, alternating with this one's, twice each.
#  14. muon: Muon against AdamW (NOTE [Muon]) on configs/gpt-tiny.toml's model at n_embd =
#      MUON_WIDTHS (128 256) and fortunes, 1 process, float32, MUON_STEPS (500) steps of 16 x 64
#      tokens: each at lr 1e-3, 3e-3, 1e-2 with seed 1 (and the next rate past the sweep's edge
#      while the best is there), then seeds 2 and 3 at each one's best lr; the final val_loss,
#      the tokens each seed needs to reach AdamW's mean final val_loss, and a plot (docs/muon.png
#      with matplotlib).
#  15. muon-cost: the step of Muon against AdamW's on the same models, 60 steps, 3 alternating
#      rounds: the median `opt` phase and step time, tokens/s.
#  16. jsonl: data prepare of ~550 MB of JSON lines, plain, gzip and zstd, on 1 and 2 threads,
#      with a 2,000-token byte-level BPE (and bytes once): seconds, MB/s of JSON, peak RSS; the
#      outputs compared byte for byte.
#  17. lora: LoRA against a full fine-tune from the same base, on llama-tiny (the walk-through's
#      SFT data, 200 steps) and TinyLlama's 1.1B shape (4 steps): grads and optimizer bytes,
#      tokens/s, peak RSS, val_loss.
# Usage: scripts/bench.sh [--sizes 1K,1M,16M]; BENCH=zero (or peers, comm, train, pipeline,
# checkpoint, export, recompute, cp, generate, flight, fused, moe, peer-threads, prepare,
# optimizer, muon, muon-cost, jsonl, lora; a comma list) runs only those tables. BENCH=prepare (data prepare of
# a 537 MB corpus, ~16 minutes here), BENCH=optimizer (~4 minutes), BENCH=muon (~22 runs of 1 to 3
# minutes), BENCH=muon-cost (~3 minutes), BENCH=jsonl (~7 minutes) and BENCH=lora (~10 minutes,
# 18 GiB of memory) are not in the default set.
set -euo pipefail
cd "$(dirname "$0")/.."

# VESCALE_TRAIN and VESCALE_BENCH_PLAIN (as the e2e tests take them) name binaries built elsewhere;
# with both set nothing is built.
[ -n "${VESCALE_TRAIN:-}" ] && [ -n "${VESCALE_BENCH_PLAIN:-}" ] || bash scripts/build.sh >/dev/null
[ -f data/fortunes.txt ] || bash scripts/prepare_fortunes.sh >/dev/null
BIN="${VESCALE_TRAIN:-${BUILD_DIR:-build}/vescale-train}"
SIZES=(--sizes 1K,64K,1M,16M)
[ $# -gt 0 ] && SIZES=("$@")

BENCH=${BENCH:-peers,comm,train,pipeline,zero,checkpoint,export,recompute,cp,generate,flight,fused,moe}
wanted() { [[ ",$BENCH," == *",$1,"* ]]; }

if wanted comm; then
"$BIN" comm bench --nproc 2 "${SIZES[@]}" 2>/dev/null
echo
"$BIN" comm bench --nproc 4 --mesh pp=1,dp=2,tp=2 "${SIZES[@]}" 2>/dev/null
echo
fi

OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

# --- peers -----------------------------------------------------------------------------------
PY=/usr/bin/python3  # Debian's, with python3-torch 1.13: BENCH=peer-threads' peers, the tables' sums
PLAIN="${VESCALE_BENCH_PLAIN:-${BUILD_DIR:-build}/vescale-bench-plain}"
# vescale-train built on the wheel's LibTorch (scripts/test-wheel.sh builds it there).
WHEEL_BIN=${VESCALE_TRAIN_WHEEL:-build-wheel/vescale-train}
PEER_ROUNDS=${PEER_ROUNDS:-3}
PEER_STEPS=${PEER_STEPS:-40}
# The peers' candidate thread settings, ';'-separated: every candidate runs in every round and a
# peer's row is its fastest candidate by median, so the peers are tuned for the machine as it is
# during the run (BENCH=peer-threads measures a wider grid). vescale-train sets none.
# Today's PyTorch on one process: ATen's threads (and MKL's, which follow them) at 1 or 2; on two
# processes 1 each.
PEER_1_ENVS=${PEER_1_ENVS-OMP_NUM_THREADS=1;OMP_NUM_THREADS=2}
PEER_2_ENVS=${PEER_2_ENVS-OMP_NUM_THREADS=1}
# Debian's PyTorch 1.13 (BENCH=peer-threads): 1 intra-op thread, and OpenBLAS on 1 or both cores
# (2 intra-op threads lose several-fold here: NOTE [Thread budget]).
PEER_PY1_ENVS=${PEER_PY1_ENVS-OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1;OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=2}
# The plain loop runs with vescale-train's own budget (NOTE [Thread budget]) only: its row measures
# vescale's overhead, and the best of two noisy candidates would overstate it.
PEER_PLAIN_ENVS=${PEER_PLAIN_ENVS-OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=2}
PEER_PY_ARGS=${PEER_PY_ARGS---foreach}  # AdamW's multi-tensor path: ~6% faster here than 1.13's default loop
PEER_ARGS=(configs/gpt-tiny.toml --training.seq_len=128 --model.block_size=128
  --training.steps="$PEER_STEPS")
tokens_per_s() { sed -n 's/.*done: .*, \([0-9]*\) tokens\/s.*/\1/p' | tail -1; }
# Runs a command and then says the peak resident memory of its largest process, workers included
# (getrusage's RUSAGE_CHILDREN: every launcher here waits for its workers), on standard error.
WITH_RSS=("$PY" -c 'import resource, subprocess, sys
code = subprocess.run(sys.argv[1:]).returncode
print("max RSS KiB", resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)
sys.exit(code)')
# One run of a row (a trailing "@bf16": in bfloat16; a leading "wheel-": vescale-train on the
# wheel's LibTorch); prints "tokens/s/peak RSS MiB", or nothing
# if it failed. Thread variables are cleared first, so vescale-train runs with its defaults and a
# peer with exactly the setting it names.
peer_run() {  # row [VAR=value ...]
  local row=$1 dtype=float32 bin=$BIN; shift
  if [[ $row == *@bf16 ]]; then row=${row%@bf16}; dtype=bfloat16; fi
  if [[ $row == wheel-* ]]; then row=${row#wheel-}; bin=$WHEEL_BIN; fi  # the same row, other build
  local run=(env -u OMP_NUM_THREADS -u OPENBLAS_NUM_THREADS -u MKL_NUM_THREADS -u MALLOC_MMAP_THRESHOLD_
    -u MALLOC_TRIM_THRESHOLD_ -u MALLOC_TOP_PAD_ "$@" "${WITH_RSS[@]}")
  local args=("${PEER_ARGS[@]}" --training.dtype="$dtype")
  local vs=(train "${args[@]}" --job.dump_folder="$OUT/peer-$row" --eval.interval=0
    --eval.windows=1 --metrics.log_interval="$PEER_STEPS" --checkpoint.interval=0)
  local dp2=(--parallel.dp=2 --parallel.tp=1 --parallel.plan=gpt/dp-only)
  local tp2=(--parallel.dp=1 --parallel.tp=2 --parallel.plan=gpt/megatron-sp)
  local log="$OUT/peer-run.log"
  # shellcheck disable=SC2086  # PEER_PY_ARGS is a list of words
  case $row in
    py1) "${run[@]}" "$PY" bench/peers/gpt_torch.py "${args[@]}" $PEER_PY_ARGS ;;
    py1-foreach) "${run[@]}" "$PY" bench/peers/gpt_torch.py "${args[@]}" --foreach ;;
    ddp) "${run[@]}" "$PY" bench/peers/gpt_torch.py "${args[@]}" --nproc 2 $PEER_PY_ARGS ;;
    eager) "${run[@]}" "$PY_NOW" bench/peers/gpt_torch.py "${args[@]}" --foreach ;;
    compile) "${run[@]}" "$PY_NOW" bench/peers/gpt_torch.py "${args[@]}" --foreach --compile ;;
    ddp-now) "${run[@]}" "$PY_NOW" bench/peers/gpt_torch.py "${args[@]}" --foreach --nproc 2 ;;
    fsdp) "${run[@]}" "$PY_NOW" bench/peers/gpt_torch.py "${args[@]}" --foreach --nproc 2 --fsdp ;;
    dtensor-tp) "${run[@]}" "$PY_NOW" bench/peers/gpt_torch.py "${args[@]}" --foreach --nproc 2 --tp ;;
    plain) "${run[@]}" "$PLAIN" "${args[@]}" ;;
    vs1) "${run[@]}" "$bin" "${vs[@]}" --parallel.dp=1 --parallel.tp=1 --parallel.plan= ;;
    dp2) "${run[@]}" "$bin" "${vs[@]}" "${dp2[@]}" ;;
    zero3) "${run[@]}" "$bin" "${vs[@]}" "${dp2[@]}" --parallel.zero=3 ;;
    tp2) "${run[@]}" "$bin" "${vs[@]}" "${tp2[@]}" ;;
  esac >"$log" 2>&1
  local tokens rss
  tokens=$(tokens_per_s <"$log")
  rss=$(sed -n 's/^max RSS KiB \([0-9]*\)$/\1/p' "$log" | tail -1)
  if [ -n "$tokens" ]; then echo "$tokens/$((${rss:-0} / 1024))"; else sed 's/^/    /' "$log" | tail -3 >&2; fi
}
# Runs rows (name|row|env) round-robin for PEER_ROUNDS rounds; prints "name<TAB>run1 run2 ..." lines.
# A program and setting named by two rows runs once a round, for both.
peer_rounds() {
  declare -A runs=()
  local r spec name row envs
  for ((r = 1; r <= PEER_ROUNDS; r++)); do
    declare -A this_round=()
    for spec in "$@"; do
      IFS='|' read -r name row envs <<<"$spec"
      if [ -z "${this_round[$row|$envs]+set}" ]; then
        # shellcheck disable=SC2086  # envs is a list of VAR=value words
        this_round[$row|$envs]=$(peer_run "$row" $envs)
        echo "  round $r/$PEER_ROUNDS: $name: ${this_round[$row|$envs]:-failed}" >&2
      fi
      runs[$name]+="${this_round[$row|$envs]} "
    done
    unset this_round
  done
  for spec in "$@"; do
    IFS='|' read -r name row envs <<<"$spec"
    printf '%s\t%s\n' "$name" "${runs[$name]}"
  done
}
# Rows "label|row|candidate envs (;-separated)" as peer_rounds specs "label [env]|row|env".
peer_candidates() {
  local label=$1 row=$2 envs=$3 env
  if [ -z "$envs" ]; then echo "$label|$row|"; return; fi
  IFS=';' read -ra list <<<"$envs"
  for env in "${list[@]}"; do echo "$label [$env]|$row|$env"; done
}
# The table of peer_rounds' lines: per label "label|refs|kind", its fastest candidate's median
# tokens/s (min-max) and peak RSS, its setting, and its ratios to the labels refs (kind overhead:
# ref / label - 1).
peer_table() {  # file of peer_rounds' lines, row specs...
  "$PY" - "$@" <<'PY'
import statistics, sys
runs = {}  # name: [(tokens/s, peak RSS MiB)] of the runs that finished
for line in open(sys.argv[1]):
    name, _, values = line.rstrip("\n").partition("\t")
    runs[name] = [tuple(float(x) for x in v.split("/")) for v in values.split()]
def best(label):
    """The fastest candidate of label: (median tokens/s, runs, setting) or None."""
    found = []
    for name, v in runs.items():
        if v and (name == label or name.startswith(label + " [")):
            found.append((statistics.median(t for t, _ in v), v, name[len(label):].strip(" []") or "defaults"))
    return max(found) if found else None
w = max(len(spec.split("|")[0]) for spec in sys.argv[2:])
print(f"{'row':<{w}} {'tokens/s':>9} {'min-max':>15} {'peak RSS':>9}  {'vs. peer (tokens/s, peak RSS)':<58} threads")
notes = []
for spec in sys.argv[2:]:
    label, refs, kind = spec.split("|")
    b = best(label)
    if b is None:
        print(f"{label:<{w}} {'failed':>9}")
        continue
    m, v, setting = b
    rss = statistics.median(r for _, r in v)
    if kind == "grid":  # the label names the setting
        setting = ""
    notes_row = []
    for ref in filter(None, refs.split(",")):
        r = best(ref)
        if not r:
            continue
        # Rows of one round run back to back, so the machine's state is shared within a round and
        # not across rounds: the ratio is the median of the per-round ratios, not a ratio of
        # medians.
        tokens = [t for t, _ in v]
        ref_tokens = [t for t, _ in r[1]]
        ratio = (statistics.median(a / b for a, b in zip(tokens, ref_tokens))
                 if len(tokens) == len(ref_tokens) else m / r[0])
        ref_rss = statistics.median(x for _, x in r[1])
        if kind == "overhead":
            notes_row.append(f"vescale overhead {(ratio - 1) * 100:+.1f}%")
        else:
            notes_row.append(f"{ratio:.2f}x, {rss / ref_rss:.2f}x {ref}" if ref_rss else f"{ratio:.2f}x {ref}")
    note = "; ".join(notes_row)
    print(f"{label:<{w}} {m:>9,.0f} {f'{min(t for t, _ in v):,.0f}-{max(t for t, _ in v):,.0f}':>15} "
          f"{f'{rss:,.0f} MiB':>9}  {note:<58} {setting}")
    notes.append(f"  {label} by round: " + ", ".join(f"{t:,.0f} ({r:,.0f} MiB)" for t, r in v))
    others = [(n, statistics.median(t for t, _ in x)) for n, x in runs.items() if x and n.startswith(label + " [")]
    if len(others) > 1:
        notes.append(f"  {label} candidates: " + "; ".join(f"{n[len(label):].strip(' []')}: {x:,.0f}" for n, x in others))
print("\n".join(notes))
PY
}

if wanted peers; then
if [ ! -x "$PLAIN" ]; then echo "[bench] $PLAIN is missing (built with -DVESCALE_BUILD_BENCH=ON)" >&2; exit 1; fi
PY_NOW=$(bash scripts/python-env.sh | tail -1)  # today's PyTorch: python/requirements.txt
# The plain loop on the OpenBLAS kernels vescale-train starts again with (NOTE [BLAS kernels]):
# it has no such choice of its own, and its gap to vescale is to be the machinery alone.
blas_core=$("$BIN" train "${PEER_ARGS[@]}" --training.steps=1 --parallel.dp=1 --parallel.tp=1 \
  --parallel.plan= --job.dump_folder="$OUT/blas-core" --eval.interval=0 --checkpoint.interval=0 2>&1 |
  sed -n 's/.*, kernels \([A-Za-z0-9]*\) (OpenBLAS picked.*/\1/p' | head -1)
[ -z "$blas_core" ] || PEER_PLAIN_ENVS+=" OPENBLAS_CORETYPE=$blas_core"
wheel_rows=()
if [ -x "$WHEEL_BIN" ]; then
  wheel_rows=(wheel)
else
  echo "[bench] $WHEEL_BIN is missing: no rows of vescale-train on the wheel's LibTorch (scripts/test-wheel.sh builds it)" >&2
fi
bf16=()
grep -qwE 'avx512_bf16|amx_bf16' /proc/cpuinfo && bf16=(bf16)
torch_now=$("$PY_NOW" -c 'import torch; print(torch.__version__)')
echo "peers: the same GPT (configs/gpt-tiny.toml, seq_len = block_size = 128: 4 layers, C = 128, 4 heads,"
echo "  vocab 256, global batch 16, AdamW, clip 1.0, fortunes), $PEER_STEPS steps; tokens/s after the first step and the"
echo "  peak RSS of the largest process, median (min-max) of $PEER_ROUNDS interleaved rounds; machine: $(lscpu | sed -n 's/^Model name: *//p'),"
echo "  $(nproc) cores, $(date -u +%Y-%m-%d); torch $torch_now (PyPI wheel: MKL, oneDNN); vescale-train on Debian's LibTorch"
echo "  $(dpkg-query -W -f '${Version}' libtorch1.13 2>/dev/null || echo 1.13) (OpenBLAS) and, '(wheel LibTorch)', on the wheel's; peers' threads: the fastest of"
echo "  their candidates (threads column); vescale-train with its defaults (no thread variables set)"
vs_rows() {  # label, row, [@bf16]: vescale-train's row, and its twin on the wheel's LibTorch
  peer_candidates "$1" "$2${3:-}" ""
  [ ${#wheel_rows[@]} -eq 0 ] || peer_candidates "$1 (wheel LibTorch)" "wheel-$2${3:-}" ""
}
mapfile -t specs < <(peer_candidates "torch eager 1 process" eager "$PEER_1_ENVS"
  peer_candidates "torch.compile 1 process" compile "$PEER_1_ENVS"
  vs_rows "vescale 1 process" vs1
  peer_candidates "plain libtorch 1 process" plain "$PEER_PLAIN_ENVS"
  peer_candidates "torch DDP 2 processes" ddp-now "$PEER_2_ENVS"
  vs_rows "vescale dp=2" dp2
  peer_candidates "torch FSDP2 2 processes" fsdp "$PEER_2_ENVS"
  vs_rows "vescale dp=2 ZeRO-3" zero3
  peer_candidates "torch DTensor TP 2 processes" dtensor-tp "$PEER_2_ENVS"
  vs_rows "vescale tp=2 megatron-sp" tp2
  if [ ${#bf16[@]} -gt 0 ]; then
    peer_candidates "torch eager 1 process bf16" eager@bf16 "$PEER_1_ENVS"
    peer_candidates "torch.compile 1 process bf16" compile@bf16 "$PEER_1_ENVS"
    vs_rows "vescale 1 process bf16" vs1 @bf16
  fi)
peer_rounds "${specs[@]}" >"$OUT/peers.tsv"
one="torch.compile 1 process,torch eager 1 process"
rows=("torch eager 1 process||" "torch.compile 1 process||" "vescale 1 process|$one|"
  "vescale 1 process (wheel LibTorch)|$one|" "plain libtorch 1 process|vescale 1 process|overhead"
  "torch DDP 2 processes||" "vescale dp=2|torch DDP 2 processes|"
  "vescale dp=2 (wheel LibTorch)|torch DDP 2 processes|"
  "torch FSDP2 2 processes||" "vescale dp=2 ZeRO-3|torch FSDP2 2 processes|"
  "vescale dp=2 ZeRO-3 (wheel LibTorch)|torch FSDP2 2 processes|"
  "torch DTensor TP 2 processes||" "vescale tp=2 megatron-sp|torch DTensor TP 2 processes|"
  "vescale tp=2 megatron-sp (wheel LibTorch)|torch DTensor TP 2 processes|")
if [ ${#bf16[@]} -gt 0 ]; then
  one_bf16="torch.compile 1 process bf16,torch eager 1 process bf16"
  rows+=("torch eager 1 process bf16||" "torch.compile 1 process bf16||"
    "vescale 1 process bf16|$one_bf16|" "vescale 1 process bf16 (wheel LibTorch)|$one_bf16|")
fi
[ ${#wheel_rows[@]} -gt 0 ] || mapfile -t rows < <(printf '%s\n' "${rows[@]}" | grep -v "(wheel LibTorch)")
peer_table "$OUT/peers.tsv" "${rows[@]}"
echo
fi

if wanted peer-threads; then
echo "peer thread settings: tokens/s (median of $PEER_ROUNDS interleaved rounds, $PEER_STEPS steps; threads = OMP_NUM_THREADS, blas = OPENBLAS_NUM_THREADS, - = unset)"
specs=()
for omp in - 1 2; do
  for blas in - 1 2; do
    envs=""
    [ "$omp" != - ] && envs+="OMP_NUM_THREADS=$omp "
    [ "$blas" != - ] && envs+="OPENBLAS_NUM_THREADS=$blas"
    specs+=("python 1 process threads $omp blas $blas|py1|$envs")
    specs+=("plain 1 process threads $omp blas $blas|plain|$envs")
  done
done
specs+=("python 1 process threads 1 blas 1, AdamW foreach|py1-foreach|OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1")
for omp in - 1 2; do
  for blas in - 1; do
    envs=""
    [ "$omp" != - ] && envs+="OMP_NUM_THREADS=$omp "
    [ "$blas" != - ] && envs+="OPENBLAS_NUM_THREADS=$blas"
    specs+=("python DDP threads $omp blas $blas|ddp|$envs")
  done
done
peer_rounds "${specs[@]}" >"$OUT/threads.tsv"
names=()
for spec in "${specs[@]}"; do names+=("${spec%%|*}||grid"); done
peer_table "$OUT/threads.tsv" "${names[@]}"
echo
fi
train() {  # name, overrides...
  local name=$1; shift
  "$BIN" train configs/gpt-tiny.toml --job.dump_folder="$OUT/$name" --training.steps=60 \
    --eval.interval=0 --eval.windows=4 --metrics.log_interval=60 "$@" 2>&1 | grep "done:" | sed 's/.*done: //'
}
if wanted train; then
echo "training throughput: configs/gpt-tiny.toml, float32, 60 steps (tokens/s after the first step)"
printf "%-24s %s\n" "layout" "result"
printf "%-24s %s\n" "1 process" "$(train single --parallel.dp=1 --parallel.tp=1 --parallel.plan=)"
printf "%-24s %s\n" "dp=2 x tp=2 megatron-sp" "$(train dp2tp2)"
printf "%-24s %s\n" "dp=2 x tp=2 megatron-tp" "$(train dp2tp2tp --parallel.plan=gpt/megatron-tp)"
echo
fi

if wanted pipeline; then
echo "pipeline schedules: configs/gpt-tiny.toml at pp=2 (dp=1, tp=1), float32, 30 steps"
printf "%-18s %4s %10s %16s %10s %22s %22s\n" "schedule" "m" "tokens/s" "bubble r0 / r1" "simulated" "peak RSS r0 / r1" "in flight r0 / r1"
pipeline_row() {  # schedule, virtual, micro-batches
  local args=(--parallel.pp=2 --parallel.dp=1 --parallel.tp=1 --parallel.plan= \
    --parallel.pp_schedule="$1" --parallel.pp_virtual="$2" --parallel.microbatches="$3")
  local log sim
  log=$("$BIN" train configs/gpt-tiny.toml --job.dump_folder="$OUT/pp-$1-$3" --training.steps=30 \
    --eval.interval=0 --eval.windows=4 --metrics.log_interval=30 "${args[@]}" 2>&1)
  sim=$("$BIN" plan schedule configs/gpt-tiny.toml "${args[@]}" 2>/dev/null | grep '^bubble' | awk '{print $2}')
  local tok b0 b1 m0 m1 f0 f1
  tok=$(echo "$log" | grep "done:" | sed 's/.*, \([0-9]*\) tokens\/s.*/\1/')
  b0=$(echo "$log" | grep "pp rank 0:" | sed 's/.*bubble \([0-9.]*%\).*/\1/')
  b1=$(echo "$log" | grep "pp rank 1:" | sed 's/.*bubble \([0-9.]*%\).*/\1/')
  m0=$(echo "$log" | grep "pp rank 0:" | sed 's/.*peak resident memory //')
  m1=$(echo "$log" | grep "pp rank 1:" | sed 's/.*peak resident memory //')
  f0=$(echo "$log" | grep "pp rank 0:" | sed 's/.*in flight \(.*\); peak.*/\1/')
  f1=$(echo "$log" | grep "pp rank 1:" | sed 's/.*in flight \(.*\); peak.*/\1/')
  printf "%-18s %4s %10s %16s %10s %24s %18s\n" "$1" "$3" "$tok" "$b0 / $b1" "$sim" "$m0 / $m1" \
    "$(echo "$f0" | sed "s/stage /s/g") / $(echo "$f1" | sed "s/stage /s/g")"
}
for m in 4 8 16; do
  pipeline_row gpipe 1 "$m"
  pipeline_row 1f1b 1 "$m"
  pipeline_row interleaved-1f1b 2 "$m"
  pipeline_row zbv 2 "$m"
  pipeline_row zb-h1 1 "$m"
done
echo
fi

if wanted zero; then
echo "ZeRO: configs/gpt-tiny.toml (tp=1), float32, 30 steps; rank 0's state after a step, peak RSS, dp bytes per step"
printf "%-4s %-5s %10s %12s %12s %12s %12s %s\n" "dp" "zero" "tokens/s" "params" "grads" "optimizer" "peak RSS" "dp bytes/step"
zero_row() {  # dp, stage
  local dir="$OUT/zero-$1-$2" log
  log=$("$BIN" train configs/gpt-tiny.toml --job.dump_folder="$dir" --training.steps=30 \
    --eval.interval=0 --eval.windows=4 --metrics.log_interval=30 --parallel.tp=1 \
    --parallel.plan= --parallel.dp="$1" --parallel.zero="$2" 2>&1)
  local tok peak
  tok=$(echo "$log" | grep "done:" | sed 's/.*, \([0-9]*\) tokens\/s.*/\1/')
  peak=$(echo "$log" | grep "done:" | sed -n 's/.*peak RSS \(.*\)$/\1/p')
  python3 - "$dir/metrics.jsonl" "$1" "$2" "$tok" "$peak" <<'PY'
import json, sys
path, dp, zero, tok, peak = sys.argv[1:]
m = [json.loads(l) for l in open(path)][-1]
mib = lambda b: f"{b / 2**20:.2f} MiB"
s = m["state_bytes"]
kinds = m.get("comm_bytes_by_kind", {}).get("dp", {})
short = {"all_reduce": "ar", "reduce_scatter": "rs", "all_gather": "ag"}
comm = ", ".join(f"{short.get(k, k)} {mib(v)}" for k, v in sorted(kinds.items())) or mib(m["comm_bytes"].get("dp", 0))
print(f"{dp:<4} {zero:<5} {tok:>10} {mib(s['params']):>12} {mib(s['grads']):>12} {mib(s['optimizer']):>12} {peak:>12} {comm}")
PY
}
for dp in 2 4; do
  for zero in 0 1 2 3; do
    zero_row "$dp" "$zero"
  done
done
fi

if wanted checkpoint; then
echo
echo "checkpoints: gpt n_embd 512, 8 blocks, AdamW (about 300 MB of state), dp=1 x tp=2, float32, 7 steps, saves at 3 and 6"
echo "(stall: training thread's time in the save; write: step folder bytes / time from first file opened to COMMIT, fsync included, as dd conv=fsync)"
printf "%-8s %-6s %10s %12s %12s %12s %7s %12s\n" "format" "mode" "size" "stall ms" "write MB/s" "dd MB/s" "ratio" "peak RSS r0"
checkpoint_row() {  # format, async
  local dir="$OUT/ckpt-$1-$2" log
  log=$("$BIN" train configs/gpt-tiny.toml --job.dump_folder="$dir" --model.n_embd=512 \
    --model.n_layer=8 --model.n_head=8 --parallel.dp=1 --parallel.tp=2 \
    --parallel.plan=gpt/megatron-tp --training.global_batch_size=2 --training.seq_len=32 \
    --training.steps=7 --eval.interval=0 --eval.windows=1 --metrics.log_interval=7 \
    --checkpoint.interval=3 --checkpoint.keep=1 --checkpoint.format="$1" \
    --checkpoint.async="$2" 2>&1)
  local peak saves bytes dd
  peak=$(echo "$log" | grep "done:" | sed -n 's/.*peak RSS \(.*\)$/\1/p')
  saves=$(echo "$log" | grep "saved " | sed 's/.*: \(.*\) in .*, \([0-9]*\) MB\/s (stall \([0-9]*\) ms)/\1 \2 \3/')
  bytes=$(du -sb "$dir/checkpoints"/step-000006 | cut -f1)
  dd=$(dd if=/dev/zero of="$dir/ddtest" bs=1M count=$((bytes / 1048576)) conv=fsync 2>&1 | tail -1)
  rm -f "$dir/ddtest"
  python3 - "$1" "$2" "$bytes" "$peak" "$dd" "$saves" <<'PY'
import sys
fmt, mode, size, peak, dd, saves = sys.argv[1:]
rows = [l.split() for l in saves.splitlines() if l.strip()]
stall = sum(float(r[-1]) for r in rows) / len(rows)
write = sum(float(r[-2]) for r in rows) / len(rows)
parts = dd.split()
dd_mbs = float(parts[0]) / 1e6 / float(parts[parts.index("copied,") + 1])
mode = "async" if mode == "true" else "sync"
print(f"{fmt:<8} {mode:<6} {int(size) / 1e6:>7.0f} MB {stall:>12.0f} {write:>12.0f} {dd_mbs:>12.0f} {write / dd_mbs:>7.2f} {peak:>12}")
PY
}
for format in sharded merged; do
  for async in false true; do
    checkpoint_row "$format" "$async"
  done
done
fi

# --- Hugging Face export ---------------------------------------------------------------------
if wanted export; then
echo
echo "export --format hf: a Llama of 125M parameters (12 layers, 768 hidden, 32000 vocabulary,"
echo "untied), one float32 training step saved sharded on 1 process, then exported"
dir="$OUT/export"
"$BIN" train configs/llama-tiny.toml --job.dump_folder="$dir" --data.source=synthetic \
  --model.vocab_size=32000 --model.n_embd=768 --model.n_layer=12 --model.n_head=12 \
  --model.n_kv_head=4 --model.intermediate_size=2048 --training.global_batch_size=2 \
  --training.steps=1 --parallel.dp=1 --parallel.tp=1 --parallel.plan= --eval.windows=1 \
  --checkpoint.interval=1 >/dev/null 2>&1
printf '| dtype | tensors | bytes | seconds | MB/s | peak RSS |\n| --- | --- | --- | --- | --- | --- |\n'
for dtype in float32 bfloat16; do
  line=$("$BIN" export "$dir/checkpoints/latest" -o "$OUT/hf-$dtype" --format hf --dtype "$dtype")
  echo "$line" | sed -E 's/.*: ([0-9]+) tensors, ([^ ]+) in .* files?, ([^ ]+) \(([0-9]+) MB\/s\), peak RSS (.*)/| '"$dtype"' | \1 | \2 | \3 | \4 | \5 |/'
done
fi

# --- activation checkpointing ----------------------------------------------------------------
if wanted recompute; then
echo
echo "activation checkpointing: 1 process, float32, dropout 0.1; activations: bytes the step's"
echo "forwards keep for the backward, as metrics.jsonl reports them (NOTE [Activation bytes]);"
echo "step time: median over the steps after the first"
printf '| model | recompute | activations | vs none | step ms | vs none | peak RSS |\n| --- | --- | --- | --- | --- | --- | --- |\n'
recompute_row() {  # label, mode, steps, overrides...
  local label=$1 mode=$2 steps=$3 dir="$OUT/recompute-$1-$2" log
  shift 3
  log=$("$BIN" train configs/gpt-tiny.toml --job.dump_folder="$dir" --training.steps="$steps" \
    --eval.interval=0 --eval.windows=1 --metrics.log_interval=1 --parallel.dp=1 \
    --parallel.tp=1 --parallel.plan= --model.dropout=0.1 \
    --training.activation_checkpoint="$mode" "$@" 2>&1)
  local peak
  peak=$(echo "$log" | grep "done:" | sed -n 's/.*peak RSS \(.*\)$/\1/p')
  python3 - "$dir/metrics.jsonl" "$label" "$mode" "$peak" "$OUT/recompute-$label.none" <<'PY'
import json, os, statistics, sys
path, label, mode, peak, base_file = sys.argv[1:]
lines = [json.loads(l) for l in open(path) if '"step_time_s"' in l]
act = lines[-1]["state_bytes"]["activations"]
ms = statistics.median(l["step_time_s"] for l in lines[1:]) * 1e3
if mode == "none":
    open(base_file, "w").write(f"{act} {ms}")
base_act, base_ms = map(float, open(base_file).read().split())
print(f"| {label} | {mode} | {act / 2**20:.2f} MiB | {act / base_act:.2f} | {ms:.0f} | {ms / base_ms:.2f} | {peak} |")
PY
}
for mode in none selective full; do
  recompute_row gpt-tiny "$mode" 30
done
for mode in none selective full; do
  recompute_row "8x256,T512" "$mode" 8 --model.n_layer=8 --model.n_embd=256 --model.n_head=8 \
    --model.block_size=512 --training.seq_len=512 --training.global_batch_size=8
done
fi

# --- context parallelism ---------------------------------------------------------------------
if wanted cp; then
echo
echo "context parallelism: gpt-tiny's model (4 blocks, C = 128) at T = 1024, 2 sequences a step,"
echo "float32, cp ranks as processes on this machine; tokens/s: median over the steps after the"
echo "first; activations and cp bytes: rank 0's in the last step (metrics.jsonl); formula: the"
echo "ring volume plan lint states, 3 (cp - 1) key/value chunk pairs per block"
printf '| cp | tokens/s | activations | vs cp 1 | cp bytes sent | formula | peak RSS |\n| --- | --- | --- | --- | --- | --- | --- |\n'
for cp in 1 2 4; do
  dir="$OUT/cp-$cp"
  args=(--job.dump_folder="$dir" --training.steps=8 --eval.interval=0 --eval.windows=1
    --metrics.log_interval=1 --parallel.dp=1 --parallel.tp=1 --parallel.plan=
    --parallel.cp="$cp" --model.block_size=1024 --training.seq_len=1024
    --training.global_batch_size=2)
  log=$("$BIN" train configs/gpt-tiny.toml "${args[@]}" 2>&1)
  peak=$(echo "$log" | grep "done:" | head -1 | sed -n 's/.*peak RSS \(.*\)$/\1/p')
  formula=$("$BIN" plan lint configs/gpt-tiny.toml "${args[@]}" |
    sed -n 's/.*ring attention sends \([0-9]*\) B.*/\1/p')
  python3 - "$dir/metrics.jsonl" "$cp" "$peak" "${formula:-0}" "$OUT/cp-base" <<'PY'
import json, statistics, sys
path, cp, peak, formula, base_file = sys.argv[1:]
lines = [json.loads(l) for l in open(path) if '"step_time_s"' in l]
act = lines[-1]["state_bytes"]["activations"]
sent = lines[-1].get("comm_bytes_by_kind", {}).get("cp", {}).get("send", 0)
tps = statistics.median(l["tokens_per_s"] for l in lines[1:])
if cp == "1":
    open(base_file, "w").write(str(act))
base = float(open(base_file).read())
print(f"| {cp} | {tps:.0f} | {act / 2**20:.2f} MiB | {act / base:.2f} | {sent} | {formula} | {peak} |")
PY
done
fi

# --- generate ----------------------------------------------------------------------------------
if wanted generate; then
echo
echo "generate: 256 new tokens after a 1-token prompt, greedy, 1 process, float32; ms a step:"
echo "the mean over the first and the last quarter of the steps after the first"
printf '| model | KV cache | tokens/s | ms a step, first quarter | last quarter | first token s | restarts |\n| --- | --- | --- | --- | --- | --- | --- |\n'
one=(--parallel.dp=1 --parallel.tp=1 --parallel.plan= --eval.interval=0 --eval.windows=1)
gen_rows() {  # label, dump folder, overrides...
  local label=$1 dir=$2 cache line
  shift 2
  for cache in on off; do
    line=$("$BIN" generate configs/gpt-tiny.toml --checkpoint "$dir/checkpoints/latest" "${one[@]}" \
      "$@" --max-new-tokens 256 --greedy $([ $cache = off ] && echo --no-cache) 2>&1 >/dev/null |
      grep "\[generate\]")
    echo "$line" | sed -E 's/.*s: ([0-9.]+) tokens\/s after the first; time to first token ([0-9.]+) s; ([0-9.]+) ms a step in the first quarter, ([0-9.]+) ms in the last; .* ([0-9]+) context restarts/| '"$label"' | '"$cache"' | \1 | \3 | \4 | \2 | \5 |/'
  done
}
"$BIN" train configs/gpt-tiny.toml --job.dump_folder="$OUT/gen-tiny" "${one[@]}" --training.steps=200 \
  --checkpoint.interval=200 >/dev/null 2>&1
gen_rows gpt-tiny "$OUT/gen-tiny"
big=(--model.n_layer=8 --model.n_embd=256 --model.n_head=8 --model.block_size=512)
"$BIN" train configs/gpt-tiny.toml --job.dump_folder="$OUT/gen-big" "${one[@]}" "${big[@]}" \
  --training.steps=1 --training.seq_len=512 --training.global_batch_size=2 \
  --checkpoint.interval=1 >/dev/null 2>&1
gen_rows "8x256,block 512" "$OUT/gen-big" "${big[@]}"
fi

# --- moe ---------------------------------------------------------------------------------------
if wanted moe; then
echo
echo "mixture of experts: mixtral-tiny with 8 experts, top-2 (4 layers, C = 128, each expert a"
echo "SwiGLU of 172) against the dense llama-tiny of the same active parameters (a SwiGLU of 344),"
echo "tp = 1, float32, 40 steps of 16 x 64 tokens; tokens/s: median over the steps after the first;"
echo "params: rank 0's parameter bytes; ep and dp bytes: rank 0's in the last step (metrics.jsonl)"
printf '| model | layout | tokens/s | params | ep bytes/step | dp bytes/step | peak RSS |\n| --- | --- | --- | --- | --- | --- | --- |\n'
moe_row() {  # label, layout, config, overrides...
  local label=$1 layout=$2 config=$3 dir log peak
  shift 3
  dir="$OUT/moe-$label-${layout// /}"
  log=$("$BIN" train "$config" --job.dump_folder="$dir" --training.steps=40 --eval.interval=0 \
    --eval.windows=1 --metrics.log_interval=1 --parallel.tp=1 "$@" 2>&1)
  peak=$(echo "$log" | grep "done:" | head -1 | sed -n 's/.*peak RSS \(.*\)$/\1/p')
  python3 - "$dir/metrics.jsonl" "$label" "$layout" "$peak" <<'PY'
import json, statistics, sys
path, label, layout, peak = sys.argv[1:]
lines = [json.loads(l) for l in open(path) if '"step_time_s"' in l]
tps = statistics.median(l["tokens_per_s"] for l in lines[1:])
params = lines[-1]["state_bytes"]["params"]
comm = lines[-1].get("comm_bytes", {})
print(f"| {label} | {layout} | {tps:,.0f} | {params / 2**20:.2f} MiB | {comm.get('ep', 0):,} "
      f"| {comm.get('dp', 0):,} | {peak} |")
PY
}
moe8=(--model.num_experts=8 --model.experts_per_token=2)
dense=(--parallel.plan=llama/dp-only)
moe_row "dense llama (SwiGLU 344)" "1 process" configs/llama-tiny.toml "${dense[@]}" --parallel.dp=1
moe_row "MoE 8 x 172, top-2" "1 process" configs/mixtral-tiny.toml "${moe8[@]}" --parallel.dp=1
moe_row "dense llama (SwiGLU 344)" "dp 2" configs/llama-tiny.toml "${dense[@]}" --parallel.dp=2
moe_row "MoE 8 x 172, top-2" "dp 2" configs/mixtral-tiny.toml "${moe8[@]}" --parallel.dp=2
moe_row "MoE 8 x 172, top-2" "dp 2, ep 2" configs/mixtral-tiny.toml "${moe8[@]}" --parallel.dp=2 \
  --parallel.ep=2
fi

if wanted flight; then
echo
FLIGHT="${VESCALE_BENCH_FLIGHT:-${BUILD_DIR:-build}/vescale-bench-flight}"
"$FLIGHT"
ns=$("$FLIGHT" | sed -E 's/.*: ([0-9.]+) ns a call.*/\1/')
echo "flight recorder on 4 ranks, float32, 40 steps: calls of step 20 per rank (its dump), their cost"
echo "at $ns ns a call against the median step time, and tokens/s with the recorder on and off"
printf '| job | calls a step (ranks 0-3) | recorder per step | median step | share | tokens/s on | tokens/s off | on vs off |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n'
flight_rows() {  # label, overrides...
  local label=$1 round entries
  shift
  declare -A tok=([on]="" [off]="")
  for round in 1 2 3; do
    for entries in 4096 0; do
      local dir="$OUT/flight-$round-$entries"
      "$BIN" train configs/gpt-dp2-tp2.toml --job.dump_folder="$dir" --training.steps=40 \
        --eval.interval=0 --eval.windows=1 --metrics.log_interval=1 \
        --comm.flight_recorder_entries=$entries --comm.flight_recorder_dump=20 "$@" >/dev/null 2>&1
      tok[$([ $entries = 0 ] && echo off || echo on)]+=" $($PY -c "import json,sys; print(json.loads(open(sys.argv[1]).readlines()[-1])['tokens_per_s'])" "$dir/metrics.jsonl")"
    done
  done
  $PY - "$label" "$ns" "$OUT/flight-1-4096" "${tok[on]}" "${tok[off]}" <<'PYEOF'
import json, os, statistics, sys
label, ns, folder, on, off = sys.argv[1:]
calls = []
for r in range(4):
    d = json.load(open(os.path.join(folder, "flight", f"rank-{r}.json")))
    calls.append(sum(1 for e in d["entries"] if e["step"] == 20))
steps = [json.loads(l)["step_time_s"] for l in open(os.path.join(folder, "metrics.jsonl"))][1:]
step = statistics.median(steps)
cost = max(calls) * float(ns) * 1e-9
on = [float(x) for x in on.split()]
off = [float(x) for x in off.split()]
m_on, m_off = statistics.median(on), statistics.median(off)
print(f"| {label} | {', '.join(map(str, calls))} | {cost * 1e6:.1f} us | {step * 1e3:.1f} ms | "
      f"{100 * cost / step:.3f}% | {m_on:,.0f} | {m_off:,.0f} | {100 * (m_on / m_off - 1):+.1f}% |")
PYEOF
}
flight_rows "dp 2 x tp 2 megatron-tp"
flight_rows "pp 2 x tp 2, 4 micro-batches" --parallel.dp=1 --parallel.pp=2 --parallel.microbatches=4
fi

# --- fused loss and projections ---------------------------------------------------------------
if wanted fused; then
echo
echo "fused LM loss and projections (NOTE [Fused LM loss], NOTE [Fused projections]): gpt-tiny's"
echo "model (4 blocks, C = 128, T = 128, 16 sequences a step, float32) on 1 process at its byte"
echo "vocabulary (256) and at GPT-2's (50,304), each switch on and off; tokens/s: median (min-max)"
echo "of 3 rounds that run every row in turn, each the median over the steps after the first;"
echo "activations: the last step's (metrics.jsonl, NOTE [Activation bytes])"
printf '| vocab | fused loss | fused projections | tokens/s | min-max | vs both off | activations | vs both off | peak RSS |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n'
FUSED_VARIANTS=("true true" "true false" "false true" "false false")
for vocab in 256 50304; do
  for round in 1 2 3; do
    for variant in "${FUSED_VARIANTS[@]}"; do
      read -r loss proj <<<"$variant"
      dir="$OUT/fused-$vocab-$loss-$proj-$round"
      log=$("$BIN" train configs/gpt-tiny.toml --job.dump_folder="$dir" --training.steps=12 \
        --eval.interval=0 --eval.windows=1 --metrics.log_interval=1 --checkpoint.interval=0 \
        --parallel.dp=1 --parallel.tp=1 --parallel.plan= --model.block_size=128 \
        --training.seq_len=128 --model.vocab_size=$vocab --data.source=synthetic \
        --training.fused_loss=$loss --training.fused_projections=$proj 2>&1)
      echo "$log" | grep "done:" | sed -n 's/.*peak RSS \(.*\)$/\1/p' >"$dir/peak"
    done
  done
  python3 - "$OUT" "$vocab" "${FUSED_VARIANTS[@]}" <<'PY'
import json, os, statistics, sys
out, vocab, variants = sys.argv[1], sys.argv[2], sys.argv[3:]
rows = {}
for v in variants:
    loss, proj = v.split()
    tps, act, peak = [], 0, ""
    for r in (1, 2, 3):
        d = os.path.join(out, f"fused-{vocab}-{loss}-{proj}-{r}")
        lines = [json.loads(l) for l in open(os.path.join(d, "metrics.jsonl")) if '"step_time_s"' in l]
        tps.append(16 * 128 / statistics.median(l["step_time_s"] for l in lines[1:]))
        act = lines[-1]["state_bytes"]["activations"]
        peak = open(os.path.join(d, "peak")).read().strip()
    rows[v] = (statistics.median(tps), min(tps), max(tps), act, peak)
base = rows["false false"]
for v in variants:
    loss, proj = v.split()
    t, lo, hi, act, peak = rows[v]
    print(f"| {int(vocab):,} | {loss} | {proj} | {t:,.0f} | {lo:,.0f}-{hi:,.0f} | {t / base[0]:.2f}x | "
          f"{act / 2**20:.1f} MiB | {act / base[3]:.2f} | {peak} |")
PY
done
fi

if wanted optimizer; then
echo
echo "optimizer phase (NOTE [Adjacent runs]): GPT-2 124M, 1 x 32 tokens a step, 1 process, 6 steps;"
echo "medians of steps 3-6; two rounds that alternate the binaries"
printf '| binary | dtype | opt ms | step ms | optimizer state + masters |\n| --- | --- | --- | --- | --- |\n'
binaries=("$BIN")
[ -n "${OLD_TRAIN:-}" ] && binaries=("$OLD_TRAIN" "$BIN")
for dtype in float32 bfloat16; do
  for round in 1 2; do
    for bin in "${binaries[@]}"; do
      dir="$OUT/optimizer-$dtype-$round-$(basename "$bin")"
      "$bin" train configs/gpt2-124m.toml --job.dump_folder="$dir" --training.steps=6 \
        --training.dtype=$dtype --training.global_batch_size=1 --training.seq_len=32 \
        --training.device=cpu --eval.interval=0 --eval.windows=1 --metrics.log_interval=1 \
        --checkpoint.interval=0 >/dev/null 2>&1
      python3 - "$dir/metrics.jsonl" "$bin" "$dtype" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])][2:]
med = lambda key: 1e3 * statistics.median(key(r) for r in rows)
state = rows[-1]["state_bytes"]["optimizer"]
print(f"| {sys.argv[2]} | {sys.argv[3]} | {med(lambda r: r['time_s']['optimizer']):.0f} | "
      f"{med(lambda r: r['step_time_s']):.0f} | {state / 2**30:.2f} GiB |")
PY
    done
  done
done
fi

if wanted prepare; then
echo
echo "data prepare: 110 files of the fortunes corpus twice over (537 MB), a 2,000-piece SentencePiece"
echo "BPE model trained on the corpus (tokenizer train), a GPT-2 style byte-level BPE tokenizer.json"
echo "of 2,000 tokens (trained by tests/e2e/bytelevel_bpe_reference.py), and raw bytes; wall time"
echo "and peak RSS by /usr/bin/time; the outputs of 1 and 2 threads compared byte for byte"
printf '| tokenizer | threads | tokens | bytes a token | seconds | MB/s | peak RSS |\n| --- | --- | --- | --- | --- | --- | --- |\n'
corpus="$OUT/prepare-corpus"
mkdir -p "$corpus"
for i in $(seq 101 210); do cat data/fortunes.txt data/fortunes.txt > "$corpus/part$i.txt"; done
"$BIN" tokenizer train data/fortunes.txt --vocab-size 2000 -o "$OUT/prepare.model" >/dev/null
/usr/bin/python3 tests/e2e/bytelevel_bpe_reference.py train data/fortunes.txt --vocab-size 2000 \
  --style gpt2 -o "$OUT/prepare-tokenizer.json" >/dev/null 2>&1
prepare_row() {  # tokenizer label, tokenizer, threads
  local dir="$OUT/prepare-$1-$3" line peak
  line=$( { /usr/bin/time -f 'PEAK %M' "$BIN" data prepare "$corpus"/part*.txt --tokenizer "$2" \
    -o "$dir" --threads "$3" 2>&1 >&3 | grep PEAK; } 3>&1)
  peak=$(echo "$line" | awk '/PEAK/ {printf "%.0f MiB", $2 / 1024}')
  echo "$line" | python3 -c '
import re, sys
text = sys.stdin.read()
m = re.search(r"-> (\d+) tokens \(([\d.]+) bytes a token.* in ([\d.]+)s, ([\d.]+) MB/s", text)
print(f"| {sys.argv[1]} | {sys.argv[2]} | {int(m.group(1)):,} | {m.group(2)} | {m.group(3)} | {m.group(4)} | {sys.argv[3]} |")
' "$1" "$3" "$peak"
}
prepare_row sentencepiece "$OUT/prepare.model" 1
prepare_row sentencepiece "$OUT/prepare.model" 2
prepare_row hf-bpe "$OUT/prepare-tokenizer.json" 1
prepare_row hf-bpe "$OUT/prepare-tokenizer.json" 2
prepare_row bytes bytes 2
for t in sentencepiece hf-bpe; do
  cmp -s "$OUT/prepare-$t-1/train.bin" "$OUT/prepare-$t-2/train.bin" &&
    echo "$t, 1 and 2 threads: identical train.bin" || echo "$t, 1 and 2 threads: train.bin DIFFERS"
done
rm -rf "$corpus"
fi

if wanted jsonl; then
echo
echo "data prepare of JSON lines: ~550 MB of {\"id\", \"text\"} lines (the fortunes corpus's paragraphs"
echo "200 times over), plain, gzip (-6) and zstd (-3), with a GPT-2 style byte-level BPE tokenizer.json"
echo "of 2,000 tokens (as the data prepare table's), and raw bytes (whose 2 bytes a byte of output make"
echo "it the disk's speed); wall time and peak RSS by /usr/bin/time; MB/s of JSON read; every BPE"
echo "output compared byte for byte with the plain file's at 1 thread"
printf '| tokenizer | format | file | threads | seconds | MB/s of JSON | peak RSS |\n| --- | --- | --- | --- | --- | --- | --- |\n'
corpus="$OUT/jsonl"
mkdir -p "$corpus"
/usr/bin/python3 - "$corpus/c.jsonl" <<'PY'
import json, sys
paras = [p.strip() for p in open("data/fortunes.txt", encoding="utf-8").read().split("\n\n") if p.strip()]
with open(sys.argv[1], "w", encoding="utf-8") as f:
    n = 0
    for r in range(200):
        for p in paras:
            f.write(json.dumps({"id": n, "text": p}, ensure_ascii=False) + "\n")
            n += 1
PY
gzip -6 -k "$corpus/c.jsonl"
zstd -q -3 -k "$corpus/c.jsonl"
/usr/bin/python3 tests/e2e/bytelevel_bpe_reference.py train data/fortunes.txt --vocab-size 2000 \
  --style gpt2 -o "$OUT/jsonl-tokenizer.json" >/dev/null 2>&1
jsonl_row() {  # tokenizer label, tokenizer, format label, file, threads
  local dir="$OUT/jsonl-$1-$3-$5" line peak size
  line=$( { /usr/bin/time -f 'PEAK %M' "$BIN" data prepare "$4" --tokenizer "$2" -o "$dir" \
    --threads "$5" 2>&1 >&3 | grep PEAK; } 3>&1)
  peak=$(echo "$line" | awk '/PEAK/ {printf "%.0f MiB", $2 / 1024}')
  size=$(du -m "$4" | cut -f1)
  echo "$line" | python3 -c '
import re, sys
text = sys.stdin.read()
m = re.search(r" in ([\d.]+)s, ([\d.]+) MB/s", text)
print(f"| {sys.argv[1]} | {sys.argv[2]} | {sys.argv[3]} MB | {sys.argv[4]} | {m.group(1)} | {m.group(2)} | {sys.argv[5]} |")
' "$1" "$3" "$size" "$5" "$peak"
}
for threads in 1 2; do
  jsonl_row hf-bpe "$OUT/jsonl-tokenizer.json" plain "$corpus/c.jsonl" "$threads"
  jsonl_row hf-bpe "$OUT/jsonl-tokenizer.json" gzip "$corpus/c.jsonl.gz" "$threads"
  jsonl_row hf-bpe "$OUT/jsonl-tokenizer.json" zstd "$corpus/c.jsonl.zst" "$threads"
done
jsonl_row bytes bytes plain "$corpus/c.jsonl" 2
for run in plain-2 gzip-1 gzip-2 zstd-1 zstd-2; do
  cmp -s "$OUT/jsonl-hf-bpe-plain-1/train.bin" "$OUT/jsonl-hf-bpe-$run/train.bin" &&
    cmp -s "$OUT/jsonl-hf-bpe-plain-1/val.bin" "$OUT/jsonl-hf-bpe-$run/val.bin" ||
    echo "jsonl $run: token files DIFFER from plain at 1 thread"
done
echo "every format and thread count: the same train.bin and val.bin"
rm -rf "$corpus" "$OUT"/jsonl-*
fi

if wanted muon; then
MUON_STEPS=${MUON_STEPS:-500}
MUON_WIDTHS=${MUON_WIDTHS:-128 256}
echo "muon vs adamw: configs/gpt-tiny.toml's model at n_embd = $MUON_WIDTHS on fortunes, 1 process,"
echo "float32, $MUON_STEPS steps of 16 x 64 tokens, cosine to 0.1 of the lr, validation every 50 steps"
echo "(8 windows)"
muon_run() {  # width optimizer lr seed
  local dir="$OUT/muon-w$1-$2_$3_$4"
  "$BIN" train configs/gpt-tiny.toml --parallel.dp=1 --parallel.tp=1 --parallel.plan= \
    --model.n_embd="$1" --optimizer.name="$2" --optimizer.lr="$3" --training.seed="$4" \
    --training.steps="$MUON_STEPS" --eval.interval=50 --eval.windows=8 --metrics.log_interval=50 \
    --checkpoint.interval=0 --job.dump_folder="$dir" >"$dir.log" 2>&1
}
for width in $MUON_WIDTHS; do
  for opt in adamw muon; do
    for lr in 1e-3 3e-3 1e-2; do muon_run "$width" "$opt" "$lr" 1; done
    # A best rate at the sweep's edge: the next rate past it, until the best is inside.
    while edge=$(python3 scripts/lib/muon_table.py edge "$OUT" "$width" "$opt") && [ -n "$edge" ]; do
      muon_run "$width" "$opt" "$edge" 1
    done
    best=$(python3 scripts/lib/muon_table.py best "$OUT" "$width" "$opt")
    for seed in 2 3; do muon_run "$width" "$opt" "$best" "$seed"; done
  done
done
# Debian's python3 has matplotlib (scripts/setup.sh); another first on PATH may not.
plot_py=$([ -x /usr/bin/python3 ] && echo /usr/bin/python3 || echo python3)
"$plot_py" scripts/lib/muon_table.py table "$OUT" 1024 "${MUON_PNG:-docs/muon.png}"
echo
fi

if wanted muon-cost; then
echo "muon's step against adamw's: the same models, 1 process, float32, 60 steps of 16 x 64 tokens,"
echo "3 alternating rounds; the median over steps 11-60 of each round, then over the rounds"
for round in 1 2 3; do
  for width in ${MUON_WIDTHS:-128 256}; do
    for opt in adamw muon; do
      dir="$OUT/cost-w$width-${opt}_$round"
      "$BIN" train configs/gpt-tiny.toml --parallel.dp=1 --parallel.tp=1 --parallel.plan= \
        --model.n_embd="$width" --optimizer.name="$opt" --training.steps=60 --eval.interval=0 \
        --eval.windows=1 --metrics.log_interval=1 --checkpoint.interval=0 \
        --job.dump_folder="$dir" >"$dir.log" 2>&1
    done
  done
done
python3 scripts/lib/muon_table.py cost "$OUT"
echo
fi

if wanted lora; then
echo "LoRA against a full fine-tune (NOTE [LoRA]), 1 process, float32, from the same Hugging Face"
echo "base; tokens/s: median over the steps after the first; grads and optimizer: rank 0's state"
echo "bytes (metrics.jsonl); val_loss: before -> after. llama-tiny: docs/data.md's walk-through"
echo "(its base trained 300 steps, 200 steps of its SFT data, its two configs). llama-1b: TinyLlama's"
echo "shape (1.1B) on synthetic tokens, batch 1 x 128, 4 steps (its base: random weights from transformers)"
printf '| model | fine-tune | grads | optimizer state | tokens/s | peak RSS | val_loss |\n'
printf '| --- | --- | --- | --- | --- | --- | --- |\n'
lora_row() {  # label, kind, dump folder, train arguments...
  local label=$1 kind=$2 dir=$3 log
  shift 3
  log=$("$BIN" train "$@" --job.dump_folder="$dir" --metrics.log_interval=1 2>&1) ||
    { echo "$log" | tail -5 >&2; return 1; }
  python3 - "$dir/metrics.jsonl" "$label" "$kind" "$(echo "$log" | grep "done:" | head -1)" <<'PY'
import json, re, statistics, sys
path, label, kind, done = sys.argv[1:]
lines = [json.loads(l) for l in open(path) if '"step_time_s"' in l]
tps = statistics.median(l["tokens_per_s"] for l in lines[1:])
state = lines[-1]["state_bytes"]
loss = re.search(r"val_loss ([\d.]+ -> [\d.]+)", done).group(1)
peak = re.search(r"peak RSS (\S+)", done).group(1)
mib = lambda b: f"{b / 2**20:,.1f} MiB"
print(f"| {label} | {kind} | {mib(state['grads'])} | {mib(state['optimizer'])} | {tps:,.0f} | "
      f"{peak} | {loss} |")
PY
}
tiny=(--parallel.dp=1 --parallel.tp=1 --parallel.plan=)
"$BIN" train configs/llama-tiny.toml "${tiny[@]}" --training.steps=300 --checkpoint.interval=300 \
  --job.dump_folder="$OUT/tiny-base" >/dev/null 2>&1
"$BIN" export "$OUT/tiny-base/checkpoints/latest" -o "$OUT/tiny-base-hf" --format hf >/dev/null
python3 scripts/sft_example.py "$OUT/sft.jsonl" >/dev/null
"$BIN" data prepare "$OUT/sft.jsonl" --sft --template configs/templates/chatml.toml \
  -o "$OUT/sft-tokens" >/dev/null
sft=(--data.path="$OUT/sft-tokens" --checkpoint.load="hf:$OUT/tiny-base-hf" --checkpoint.interval=0)
lora_row "llama-tiny (0.79M)" "full" "$OUT/tiny-full" configs/llama-tiny-sft.toml "${sft[@]}"
lora_row "llama-tiny (0.79M)" "LoRA r 16, all 7 projections" "$OUT/tiny-lora" \
  configs/llama-tiny-sft-lora.toml "${sft[@]}"
big=(configs/llama-1b.toml --parallel.dp=1 --parallel.tp=1 --parallel.plan= --parallel.zero=0
  --parallel.microbatches=1 --data.source=synthetic --training.device=cpu
  --training.dtype=float32 --training.global_batch_size=1 --training.seq_len=128
  --training.steps=4 --lr_scheduler.warmup_steps=0 --eval.interval=0 --eval.windows=1)
lora_row "llama-1b (1.1B)" "full" "$OUT/big-full" "${big[@]}" --checkpoint.interval=0
# The base: a 1.1B Llama that transformers makes (random weights), float32: the full run's own
# checkpoint would need a second copy of its 18 GiB of state to be written on this machine.
"$(bash scripts/python-env.sh 2>/dev/null | tail -1)" - "$OUT/big-base-hf" <<'PY'
import sys, torch, transformers
torch.manual_seed(0)
config = transformers.LlamaConfig(
    vocab_size=32000, hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
    num_attention_heads=32, num_key_value_heads=4, max_position_embeddings=2048,
    rms_norm_eps=1e-5, rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
    tie_word_embeddings=False)
transformers.LlamaForCausalLM(config).save_pretrained(sys.argv[1])
PY
lora_row "llama-1b (1.1B)" "LoRA r 16, all 7 projections" "$OUT/big-lora" "${big[@]}" \
  --checkpoint.load="hf:$OUT/big-base-hf" --checkpoint.interval=0 --lora.rank=16 \
  --lora.alpha=32 '--lora.targets=["q", "k", "v", "o", "gate", "up", "down"]'
echo
fi
