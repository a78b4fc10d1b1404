"""checkpoint: saves of a GPT of about 300 MB of state on tp=2, sharded and merged, sync and
async: the training stall per save, the write throughput against dd's, rank 0's peak RSS."""
import os
import re

from benchsuite import disk, trainlog
from benchsuite.tables import tiny

_SAVED = re.compile(r"saved .*, (\d+) MB/s \(stall (\d+) ms\)")


def saves(output):
    """(write MB/s, stall ms) of each `saved ...` line."""
    return [(float(m.group(1)), float(m.group(2))) for m in map(_SAVED.search, output.splitlines())
            if m]


def latest_step(checkpoints):
    """The step folder a checkpoints folder's `latest` names (the newest complete save)."""
    with open(os.path.join(checkpoints, "latest")) as f:
        return os.path.join(checkpoints, f.read().strip())


def header():
    """The column names, aligned as the rows."""
    return (f"{'format':<8} {'mode':<6} {'size':>10} {'stall ms':>12} {'write MB/s':>12} "
            f"{'dd MB/s':>12} {'ratio':>7} {'peak RSS r0':>12}")


def row(fmt, is_async, nbytes, peak, dd_mb_s, saved):
    """A row from the step folder's bytes, the peak RSS text, dd's MB/s and saves()."""
    stall = sum(s for _, s in saved) / len(saved)
    write = sum(w for w, _ in saved) / len(saved)
    mode = "async" if is_async else "sync"
    return (f"{fmt:<8} {mode:<6} {nbytes / 1e6:>7.0f} MB {stall:>12.0f} {write:>12.0f} "
            f"{dd_mb_s:>12.0f} {write / dd_mb_s:>7.2f} {peak:>12}")


def run_row(ctx, fmt, is_async):
    """Trains with saves in fmt, sync or async, and returns the row."""
    folder = f"ckpt-{fmt}-{str(is_async).lower()}"
    output = tiny.train(
        ctx, folder, 6, "--model.n_embd=512", "--model.n_layer=8", "--model.n_head=8",
        "--parallel.dp=1", "--parallel.tp=2", "--parallel.plan=gpt/megatron-tp",
        "--training.global_batch_size=2", "--training.seq_len=32", "--checkpoint.interval=3",
        "--checkpoint.keep=1", f"--checkpoint.format={fmt}",
        f"--checkpoint.async={str(is_async).lower()}", windows=1)
    nbytes = disk.apparent_bytes(latest_step(ctx.path(folder, "checkpoints")))
    dd = disk.write_mb_s(ctx.path(folder), nbytes)
    return row(fmt, is_async, nbytes, trainlog.peak_rss(output), dd, saves(output))


def run(ctx):
    print()
    print("checkpoints: gpt n_embd 512, 8 blocks, AdamW (about 300 MB of state), dp=1 x tp=2, float32, 6 steps, saves at 3 and 6")
    print("(stall: training thread's time in the save; write: step folder bytes / time from first file opened to COMMIT, fsync included, as dd conv=fsync)")
    print(header())
    for fmt in ("sharded", "merged"):
        for is_async in (False, True):
            print(run_row(ctx, fmt, is_async))
