"""cp: context parallelism at T = 1024 on cp = 1, 2 and 4 processes: tokens/s, rank 0's
activation bytes against cp = 1, its cp bytes sent against plan lint's ring formula, peak RSS."""
import re

from benchsuite import markdown, process, stats, trainlog
from benchsuite.tables import tiny

_RING = re.compile(r"ring attention sends ([0-9]*) B")


def ring_bytes(lint_output):
    """The bytes `plan lint` says ring attention sends, as text ('0' when it says none)."""
    found = [m.group(1) for m in map(_RING.search, lint_output.splitlines()) if m]
    return found[-1] if found and found[-1] else "0"


def row(cp, lines, formula, base_act, peak):
    """A row from the run's step metrics, the formula and cp = 1's activation bytes."""
    last = lines[-1]
    act = last["state_bytes"]["activations"]
    sent = last.get("comm_bytes_by_kind", {}).get("cp", {}).get("send", 0)
    tps = stats.median_after_first(lines, lambda line: line["tokens_per_s"])
    return markdown.row(cp, f"{tps:.0f}", markdown.mib(act), f"{act / base_act:.2f}", sent,
                        formula, peak)


def run(ctx):
    print()
    print("context parallelism: gpt-tiny's model (4 blocks, C = 128) at T = 1024, 2 sequences a step,")
    print("float32, cp ranks as processes on this machine; tokens/s: median over the steps after the")
    print("first; activations and cp bytes: rank 0's in the last step (metrics.jsonl); formula: the")
    print("ring volume plan lint states, 3 (cp - 1) key/value chunk pairs per block")
    print(markdown.header("cp", "tokens/s", "activations", "vs cp 1", "cp bytes sent", "formula",
                          "peak RSS"))
    base_act = None
    for cp in (1, 2, 4):
        args = [*tiny.ONE_PROCESS, f"--parallel.cp={cp}", "--model.block_size=1024",
                "--training.seq_len=1024", "--training.global_batch_size=2"]
        output = tiny.train(ctx, f"cp-{cp}", 8, *args, windows=1, log_interval=1)
        lint = process.run([ctx.train, "plan", "lint", tiny.CONFIG,
                            f"--job.dump_folder={ctx.path(f'cp-{cp}')}", "--training.steps=8",
                            "--eval.interval=0", "--eval.windows=1", "--metrics.log_interval=1",
                            *args], stderr=None)
        lines = trainlog.step_metrics(ctx.path(f"cp-{cp}", "metrics.jsonl"))
        base_act = base_act or lines[-1]["state_bytes"]["activations"]
        print(row(cp, lines, ring_bytes(lint), base_act, trainlog.peak_rss(output)))
