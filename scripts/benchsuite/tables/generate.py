"""generate: 256 new tokens (greedy, 1 process) from gpt-tiny trained 200 steps and from a GPT
of 8 blocks, C = 256, block_size 512, with and without the KV cache."""
import re

from benchsuite import markdown, process
from benchsuite.tables import tiny

_SUMMARY = re.compile(r".*s: ([0-9.]+) tokens/s after the first; time to first token ([0-9.]+) s; "
                      r"([0-9.]+) ms a step in the first quarter, ([0-9.]+) ms in the last; .* "
                      r"([0-9]+) context restarts")
ONE = [*tiny.ONE_PROCESS, "--eval.interval=0", "--eval.windows=1"]
BIG = ["--model.n_layer=8", "--model.n_embd=256", "--model.n_head=8", "--model.block_size=512"]


def row(label, cache, summary):
    """The row of a `[generate]` summary line (the line itself when it is no such line)."""
    m = _SUMMARY.match(summary)
    if not m:
        return summary
    tokens, first_token, first_quarter, last_quarter, restarts = m.groups()
    return markdown.row(label, cache, tokens, first_quarter, last_quarter, first_token, restarts)


def rows(ctx, label, folder, *overrides):
    """Prints the rows of the checkpoint in folder, with the KV cache and without."""
    for cache in ("on", "off"):
        stderr = process.run_stderr(
            [ctx.train, "generate", tiny.CONFIG, "--checkpoint", ctx.path(folder, "checkpoints", "latest"),
             *ONE, *overrides, "--max-new-tokens", "256", "--greedy",
             *(["--no-cache"] if cache == "off" else [])])
        for line in stderr.splitlines():
            if "[generate]" in line:
                print(row(label, cache, line))


def run(ctx):
    print()
    print("generate: 256 new tokens after a 1-token prompt, greedy, 1 process, float32; ms a step:")
    print("the mean over the first and the last quarter of the steps after the first")
    print(markdown.header("model", "KV cache", "tokens/s", "ms a step, first quarter",
                          "last quarter", "first token s", "restarts"))
    train = [ctx.train, "train", tiny.CONFIG]
    process.run([*train, f"--job.dump_folder={ctx.path('gen-tiny')}", *ONE,
                 "--training.steps=200", "--checkpoint.interval=200"])
    rows(ctx, "gpt-tiny", "gen-tiny")
    process.run([*train, f"--job.dump_folder={ctx.path('gen-big')}", *ONE, *BIG,
                 "--training.steps=1", "--training.seq_len=512", "--training.global_batch_size=2",
                 "--checkpoint.interval=1"])
    rows(ctx, "8x256,block 512", "gen-big", *BIG)
