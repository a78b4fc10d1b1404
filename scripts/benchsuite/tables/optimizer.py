"""optimizer: the optimizer phase of GPT-2 124M at 1 x 32 tokens a step in float32 and bf16 on 1
process: medians of steps 3-6 of its `opt` time, of the step, and the state bytes; OLD_TRAIN adds
that binary's rows, alternating with this one's, twice each."""
import os
import statistics

from benchsuite import markdown, process, trainlog

DTYPES = ("float32", "bfloat16")
ROUNDS = 2


def row(binary, dtype, lines):
    """A row from a run's metrics lines (all of them: steps 1 and 2 are left out here)."""
    rows = lines[2:]
    med = lambda key: 1e3 * statistics.median(key(r) for r in rows)  # noqa: E731
    state = rows[-1]["state_bytes"]["optimizer"]
    return markdown.row(binary, dtype, f"{med(lambda r: r['time_s']['optimizer']):.0f}",
                        f"{med(lambda r: r['step_time_s']):.0f}", f"{state / 2**30:.2f} GiB")


def binaries(ctx):
    """OLD_TRAIN then this build's binary, or this one alone."""
    old = ctx.env.get("OLD_TRAIN")
    return [old, ctx.train] if old else [ctx.train]


def run(ctx):
    print()
    print("optimizer phase (NOTE [Adjacent runs]): GPT-2 124M, 1 x 32 tokens a step, 1 process, 6 steps;")
    print("medians of steps 3-6; two rounds that alternate the binaries")
    print(markdown.header("binary", "dtype", "opt ms", "step ms", "optimizer state + masters"))
    for dtype in DTYPES:
        for rnd in range(1, ROUNDS + 1):
            for binary in binaries(ctx):
                folder = ctx.path(f"optimizer-{dtype}-{rnd}-{os.path.basename(binary)}")
                process.run([binary, "train", "configs/gpt2-124m.toml", f"--job.dump_folder={folder}",
                             "--training.steps=6", f"--training.dtype={dtype}",
                             "--training.global_batch_size=1", "--training.seq_len=32",
                             "--training.device=cpu", "--eval.interval=0", "--eval.windows=1",
                             "--metrics.log_interval=1", "--checkpoint.interval=0"])
                print(row(binary, dtype, trainlog.metrics(os.path.join(folder, "metrics.jsonl"))))
