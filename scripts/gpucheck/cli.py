"""Checks vescale-train on a GPU machine in one call (docs/design.md §18 "One GPU check"):
  build    the wheel route: scripts/setup-cuda.sh configures build-cuda/ (Release) against the
           machine's PyTorch, then only vescale-train is built
  parity   a small GPT (dropout 0.1), Llama and Mixtral for 20 steps on CUDA (one rank, NCCL)
           against the CPU: float64, float32 and bf16 losses (GPT and Llama bf16 also with every
           CUDA kernel row taken, those no GPU has run too: training.unverified_kernels); dp 2 over
           Gloo on 2 processes; a CUDA checkpoint resumed on the CPU; eval and greedy generate
           from it on CUDA against the CPU. Then the kernel rows the passing CUDA runs took
           (NOTE [GPU-verified]): those the binary does not yet call GPU-verified are printed
           with the line to write into lib/kernels/kernel_table.cpp
  ranks    several ranks sharing the one GPU (NOTE [Ranks sharing a GPU]): float64 on CUDA over
           Gloo, each layout's 10 steps against the CPU's 1-process run (1e-10): dp2 x tp2
           megatron-sp, pp2 x dp2 1f1b with 2 micro-batches, dp2 ZeRO-3, cp2 x tp2, Mixtral ep2
           over dp2, Llama tp2 (grouped-query attention); the dp2 x tp2 run's step-5 sharded
           checkpoint resumed on the CPU at 1 process; bf16 dp2 x tp2 against float32 on the CPU
           (2e-2). Each row with its time. Skipped on --cpu (the CPU's tests run these layouts;
           RANKS_ON_CPU=1 runs it there too, with VESCALE_TEST_STAGE_ON_HOST=1 through the
           staging path that CUDA tensors take: 42 s on 2 cores)
  kernels  the kernel table's rows on the GPU against the CPU's explicit rows, each kernel
           forward and backward in float32, bf16 and float16, those no GPU has run too (our own
           CUDA kernels: NOTE [CUDA kernels]), and our kernels at large and odd shapes, a process
           a kernel: the test binary built from tests/kernels/kernel_table_test.cpp and
           cuda_kernels_test.cpp alone; then each of our rows timed against its fallback
           (vescale-kernel-speed: ms, GB/s or TFLOP/s, and whether it is faster)
  bench    GPT-2 124M bf16, batch 16 x 1024 (configs/gpt2-124m.toml) in vescale-train, in
           vescale-train without its fused loss and projections (the "before" of [25]), PyTorch
           eager and torch.compile (bench/peers/gpt_torch.py): tokens/s, MFU, peak GPU memory;
           then a short run with metrics.peak_flops = 0 and training.unverified_kernels = true
           whose own MFU (metrics.jsonl, from the device's peak: NOTE [MFU peak]) is held to
           this script's 6N + 12LCT at the same tokens/s, within 1 point; last Llama 1.1B
           (configs/llama-1b.toml on one GPU, batch 4 x 2048) with its own MFU. vescale-train's rows
           also split the median step into its phases (fwd bwd sync opt other, NOTE [Step
           anatomy]) as the host's clock saw them: on a GPU the host runs ahead, and the phase
           holding the step's one host read (opt) also waits out the device's queued work
  profile  train --profile 3-3: the Chrome trace's phase and CUDA kernel events, and from them
           (scripts/lib/trace_summary.py) how long the GPU was busy in the step and its 12
           kernels of most device time
Last it prints a table of every figure against its bar, also written to
bench/results/<gpu>-<YYYY-MM-DD>.txt and DIR/table.txt, and, when OUT is set (the GPU machine's
tool brings back only what is under $OUT), to $OUT with every run's output in $OUT/logs.tgz.

  scripts/gpu-check.sh [--cpu] [--stages build,parity,ranks,kernels,bench,profile] [--out DIR]

--cpu: the same stages on the CPU, for CI (tests/e2e/test_gpu_check.py): the "cuda" side of
each parity row runs on the CPU too, so its figures must come out 0 or near; the bench runs a
small GPT; nothing goes to bench/results/. --out DIR keeps the table (DIR/table.txt) and each
run's output, metrics.jsonl and config (DIR/logs/); default: a fresh temporary folder.
Environment: VESCALE_TRAIN (a built binary: no build), PYTHON (a python3 that imports torch, for
the peers), DEADLINE (seconds, default 420: no stage and no bench row starts later), END
(seconds, default DEADLINE + 60: every run's timeout is cut to end by then, 5 s at the least),
so that one call of 8 minutes holds it all.
Exit status: 0 when no check failed, 1 when one did, 2 for a wrong option.
"""
import os
import shutil
import sys
import tempfile

from gpucheck import machine, options, results
from gpucheck.clock import Clock
from gpucheck.context import Check
from gpucheck.options import STAGE_NAMES, UsageError
from gpucheck.stages import STAGES
from gpucheck.stages.build import executable
from gpucheck.table import Report

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def header(check, command):
    """The table's first lines: when, the machine, torch, the binary (once built), the command."""
    python, versions = machine.torch_python(
        (os.environ.get("PYTHON") or "").split() + ["python3", "/usr/bin/python3"])
    check.torch_python = python
    return [machine.title_line(), machine.machine_line(check.mode),
            machine.torch_line(python, versions), "vescale-train: (no binary)",
            f"command: {command}"]


def why_not(check):
    """Why no stage may run the binary, or "": a binary left by an earlier build is not what this
    tree builds."""
    if not executable(check.binary):
        return f"no vescale-train binary at {check.binary}"
    return "the build failed" if check.build_failed else ""


def check_all(opts, check, out_dir, out, command):
    """Runs the stages --stages names, publishing the table after each; returns the exit status."""
    report, clock = check.report, check.clock
    results_file = results.results_path(check.gpu_name, machine.today()) if check.gpu_name else ""
    publish = lambda: results.publish(report.text(), out_dir, results_file, out)
    report.header = header(check, command)
    clock.say(f"mode {check.mode}, stages {opts.stages}, out folder {out_dir}")
    if opts.wanted("build"):
        clock.say("== build")
        STAGES["build"](check)
    else:
        report.build.append(f"build: not asked for (--stages); binary {check.binary}")
    if not why_not(check):
        report.header[3] = machine.binary_line(check.binary)
    publish()
    for stage in STAGE_NAMES[1:]:
        if not opts.wanted(stage):
            continue
        why = why_not(check)
        if why:
            clock.say(f"skipped {stage}: {why}")
            report.add("stages", f"{stage}: skipped: {why}", "skipped")
            continue
        # The bench decides per row (each 124M run is the long part), the others as a whole.
        if stage != "bench" and not clock.may_start(stage):
            report.add("stages", f"{stage}: skipped: past the deadline ({clock.deadline} s)",
                       "skipped")
            continue
        clock.say(f"== {stage}")
        STAGES[stage](check)
        publish()
    publish()
    print(report.text(), end="", flush=True)
    clock.say(f"table: {out_dir}/table.txt" + "".join(f", {p}" for p in (results_file, out) if p))
    return 0 if report.failed == 0 else 1


def main(argv):
    caller_dir = os.getcwd()
    os.chdir(ROOT)
    try:
        opts = options.parse(argv)
    except UsageError as e:
        print(f"gpu-check: {e}", file=sys.stderr)
        return 2
    if opts.help:
        print(__doc__, end="")
        return 0
    if opts.mode == "gpu" and not machine.has_gpu():
        print("gpu-check: no GPU here (nvidia-smi -L fails); on a machine without one run --cpu",
              file=sys.stderr)
        return 2
    clock = Clock.from_environment(os.environ)
    out = options.from_caller(os.environ["OUT"], caller_dir) if os.environ.get("OUT") else ""
    out_dir = (options.from_caller(opts.out_dir, caller_dir) if opts.out_dir
               else tempfile.mkdtemp(prefix="gpu-check.", dir="/tmp"))
    try:
        os.makedirs(os.path.join(out_dir, "logs"), exist_ok=True)
    except OSError as e:
        print(f"gpu-check: {e}", file=sys.stderr)
        return 2
    out_dir = os.path.realpath(out_dir)
    if out and os.path.realpath(out) == out_dir:
        # $OUT comes back only if it holds a few files: the table and logs.tgz, not the logs.
        print(f"gpu-check: --out must be another folder than $OUT ({out})", file=sys.stderr)
        return 2
    # The runs' dump folders (checkpoints, traces) stay out of the out folder: only what a
    # reader needs is copied into it, so that $OUT holds few files.
    scratch = tempfile.mkdtemp(prefix="gpu-check-runs.", dir="/tmp")
    check = Check(mode=opts.mode, binary=options.binary_path(opts.mode, os.environ, caller_dir),
                  logs=os.path.join(out_dir, "logs"), scratch=scratch, clock=clock,
                  report=Report(opts.mode),
                  gpu_name=machine.gpu_name() if opts.mode == "gpu" else "")
    try:
        return check_all(opts, check, out_dir, out, "scripts/gpu-check.sh " + " ".join(argv))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
