"""zero: gpt-tiny at dp=2 and dp=4 for each ZeRO stage: tokens/s, rank 0's state after a step,
its peak RSS and the dp bytes per step by kind."""
from benchsuite import trainlog
from benchsuite.markdown import mib
from benchsuite.tables import tiny

SHORT = {"all_reduce": "ar", "reduce_scatter": "rs", "all_gather": "ag"}


def header():
    """The column names, aligned as the rows."""
    return (f"{'dp':<4} {'zero':<5} {'tokens/s':>10} {'params':>12} {'grads':>12} "
            f"{'optimizer':>12} {'peak RSS':>12} dp bytes/step")


def row(dp, zero, tokens, peak, last):
    """A row from the tokens/s and peak RSS texts and the last line of metrics.jsonl."""
    state = last["state_bytes"]
    kinds = last.get("comm_bytes_by_kind", {}).get("dp", {})
    comm = (", ".join(f"{SHORT.get(k, k)} {mib(v)}" for k, v in sorted(kinds.items()))
            or mib(last["comm_bytes"].get("dp", 0)))
    return (f"{dp:<4} {zero:<5} {tokens:>10} {mib(state['params']):>12} {mib(state['grads']):>12} "
            f"{mib(state['optimizer']):>12} {peak:>12} {comm}")


def run(ctx):
    print("ZeRO: configs/gpt-tiny.toml (tp=1), float32, 30 steps; rank 0's state after a step, peak RSS, dp bytes per step")
    print(header())
    for dp in (2, 4):
        for zero in (0, 1, 2, 3):
            folder = f"zero-{dp}-{zero}"
            output = tiny.train(ctx, folder, 30, "--parallel.tp=1", "--parallel.plan=",
                                f"--parallel.dp={dp}", f"--parallel.zero={zero}")
            last = trainlog.metrics(ctx.path(folder, "metrics.jsonl"))[-1]
            print(row(dp, zero, trainlog.tokens_per_s(output) or "", trainlog.peak_rss(output),
                      last))
