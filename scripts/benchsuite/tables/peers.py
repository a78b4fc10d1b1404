"""peers and peer-threads: vescale-train against the same GPT in PyTorch (today's and Debian's
1.13) and in a plain LibTorch loop, every row once a round for PEER_ROUNDS rounds."""
import os
import sys

from benchsuite import process
from benchsuite.peers import commands, machine, rounds, settings, table
from benchsuite.peers.settings import candidates
from benchsuite.pythons import SYSTEM_PYTHON, torch_python

WHEEL = " (wheel LibTorch)"


def peer_specs(peer, plain_envs, wheel, bf16):
    """The runs of the peers table: (name, row, setting) of every candidate."""
    def vs(label, row, suffix=""):
        """vescale-train's row, and its twin on the wheel's LibTorch."""
        return candidates(label, row + suffix, "") + (
            candidates(label + WHEEL, f"wheel-{row}{suffix}", "") if wheel else [])
    specs = [*candidates("torch eager 1 process", "eager", peer.one_envs),
             *candidates("torch.compile 1 process", "compile", peer.one_envs),
             *vs("vescale 1 process", "vs1"),
             *candidates("plain libtorch 1 process", "plain", plain_envs),
             *candidates("torch DDP 2 processes", "ddp-now", peer.two_envs),
             *vs("vescale dp=2", "dp2"),
             *candidates("torch FSDP2 2 processes", "fsdp", peer.two_envs),
             *vs("vescale dp=2 ZeRO-3", "zero3"),
             *candidates("torch DTensor TP 2 processes", "dtensor-tp", peer.two_envs),
             *vs("vescale tp=2 megatron-sp", "tp2")]
    if bf16:
        specs += [*candidates("torch eager 1 process bf16", "eager@bf16", peer.one_envs),
                  *candidates("torch.compile 1 process bf16", "compile@bf16", peer.one_envs),
                  *vs("vescale 1 process bf16", "vs1", "@bf16")]
    return specs


def peer_rows(wheel, bf16):
    """The peers table's rows: (label, the labels it is compared with, kind)."""
    one = ["torch.compile 1 process", "torch eager 1 process"]
    rows = [("torch eager 1 process", [], ""), ("torch.compile 1 process", [], ""),
            ("vescale 1 process", one, ""), ("vescale 1 process" + WHEEL, one, ""),
            ("plain libtorch 1 process", ["vescale 1 process"], "overhead")]
    for peer, label in (("torch DDP 2 processes", "vescale dp=2"),
                        ("torch FSDP2 2 processes", "vescale dp=2 ZeRO-3"),
                        ("torch DTensor TP 2 processes", "vescale tp=2 megatron-sp")):
        rows += [(peer, [], ""), (label, [peer], ""), (label + WHEEL, [peer], "")]
    if bf16:
        one = ["torch.compile 1 process bf16", "torch eager 1 process bf16"]
        rows += [("torch eager 1 process bf16", [], ""), ("torch.compile 1 process bf16", [], ""),
                 ("vescale 1 process bf16", one, ""), ("vescale 1 process bf16" + WHEEL, one, "")]
    return [r for r in rows if wheel or WHEEL not in r[0]]


def thread_grid(rows_blas):
    """The peer-threads settings: (name words, setting) for OMP_NUM_THREADS in (unset, 1, 2) and
    OPENBLAS_NUM_THREADS in rows_blas (`-`: unset)."""
    for omp in ("-", "1", "2"):
        for blas in rows_blas:
            setting = (f"OMP_NUM_THREADS={omp} " if omp != "-" else "") + (
                f"OPENBLAS_NUM_THREADS={blas}" if blas != "-" else "")
            yield f"threads {omp} blas {blas}", setting


def thread_specs():
    """The runs of the peer-threads table: (name, row, setting)."""
    specs = []
    for words, setting in thread_grid(("-", "1", "2")):
        specs += [(f"python 1 process {words}", "py1", setting),
                  (f"plain 1 process {words}", "plain", setting)]
    specs.append(("python 1 process threads 1 blas 1, AdamW foreach", "py1-foreach",
                  "OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1"))
    specs += [(f"python DDP {words}", "ddp", setting) for words, setting in thread_grid(("-", "1"))]
    return specs


def runner(ctx, peer, programs):
    """run(row, setting) of one run, for rounds.rounds."""
    return lambda row, setting: rounds.run_once(ctx, programs, peer, row, setting)


def programs_of(ctx, torch_py=""):
    """The programs of the rows (torch_py: today's PyTorch's python, for the peers table)."""
    return commands.Programs(SYSTEM_PYTHON, torch_py, ctx.plain, ctx.train, ctx.wheel_train)


def run(ctx):
    if not os.access(ctx.plain, os.X_OK):
        raise process.BenchError(f"[bench] {ctx.plain} is missing (built with -DVESCALE_BUILD_BENCH=ON)")
    peer = settings.from_env(ctx.env)
    programs = programs_of(ctx, torch_python())
    # The plain loop on the OpenBLAS kernels vescale-train starts again with (NOTE [BLAS
    # kernels]): it has no such choice of its own, and its gap to vescale is to be the machinery.
    core = machine.blas_core(process.run(
        [ctx.train, "train", *commands.gpt_args(1),
         "--parallel.dp=1", "--parallel.tp=1", "--parallel.plan=",
         f"--job.dump_folder={ctx.path('blas-core')}", "--eval.interval=0",
         "--checkpoint.interval=0"], check=False))
    plain_envs = peer.plain_envs + (f" OPENBLAS_CORETYPE={core}" if core else "")
    wheel = os.access(ctx.wheel_train, os.X_OK)
    if not wheel:
        print(f"[bench] {ctx.wheel_train} is missing: no rows of vescale-train on the wheel's "
              "LibTorch (scripts/test-wheel.sh builds it)", file=sys.stderr)
    with open("/proc/cpuinfo") as f:
        bf16 = machine.has_bf16(f.read())
    for line in machine.describe(programs.torch_python, peer.steps, peer.rounds):
        print(line)
    runs = rounds.rounds(peer_specs(peer, plain_envs, wheel, bf16), peer.rounds,
                         runner(ctx, peer, programs))
    for line in table.lines(runs, peer_rows(wheel, bf16)):
        print(line)
    print()


def run_threads(ctx):
    """The peer-threads table: the grid of thread settings of Debian's PyTorch and the plain loop."""
    peer = settings.from_env(ctx.env)
    print(f"peer thread settings: tokens/s (median of {peer.rounds} interleaved rounds, {peer.steps} steps; threads = OMP_NUM_THREADS, blas = OPENBLAS_NUM_THREADS, - = unset)")
    specs = thread_specs()
    runs = rounds.rounds(specs, peer.rounds, runner(ctx, peer, programs_of(ctx)))
    for line in table.lines(runs, [(name, [], "grid") for name, _, _ in specs]):
        print(line)
    print()
