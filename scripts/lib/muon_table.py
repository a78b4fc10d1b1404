#!/usr/bin/env python3
"""scripts/bench.sh's muon tables (issue [37]): the runs under OUT named
muon-w<width>-<optimizer>_<lr>_<seed> (dump folders with metrics.jsonl, validation every few
steps) and cost-w<width>-<optimizer>_<round> (every step logged).

    muon_table.py best OUT WIDTH OPTIMIZER   # the lr of OPTIMIZER's lowest final val_loss, seed 1
    muon_table.py edge OUT WIDTH OPTIMIZER   # the next rate to try while that lr is the sweep's
                                             # largest or smallest (nothing once it is inside)
    muon_table.py table OUT TOKENS [PNG]     # per width: the sweep, the seeds, tokens to AdamW's loss
    muon_table.py cost OUT                   # per width and optimizer: median opt and step time

TOKENS is the tokens of a step. With PNG (and matplotlib) it also plots val_loss against tokens
of each optimizer's best lr, every seed, a panel per width."""
import glob
import json
import os
import re
import statistics
import sys

RATES = ["1e-4", "3e-4", "1e-3", "3e-3", "1e-2", "3e-2", "1e-1", "3e-1"]


def run_metrics(out, name):
    """(the match of `name`, a regex of a dump folder's name, and its metrics.jsonl's lines) of
    every run under out whose folder it names."""
    for path in sorted(glob.glob(os.path.join(out, "*", "metrics.jsonl"))):
        m = re.fullmatch(name, os.path.basename(os.path.dirname(path)))
        if m:
            with open(path) as f:
                yield m, [json.loads(line) for line in f]


def runs(out):
    """{(width, optimizer, lr, seed): [(step, val_loss), ...]} of every run under out."""
    found = {}
    for m, lines in run_metrics(out, r"muon-w(\d+)-(\w+)_([^_]+)_(\d+)"):
        curve = [(r["step"], r["val_loss"]) for r in lines if "val_loss" in r]
        if curve:
            found[(int(m[1]), m[2], m[3], int(m[4]))] = curve
    return found


def sweep(found, width, optimizer):
    """{lr: final val_loss} of seed 1."""
    return {lr: c[-1][1] for (w, o, lr, s), c in found.items()
            if w == width and o == optimizer and s == 1}


def best_lr(found, width, optimizer):
    finals = sweep(found, width, optimizer)
    return min(finals, key=finals.get)


def edge(found, width, optimizer):
    """The rate past the sweep's edge when the best is on it, else None (at most 2 past it)."""
    finals = sweep(found, width, optimizer)
    ranked = sorted(finals, key=float)
    best = best_lr(found, width, optimizer)
    i = RATES.index(best)
    beyond = [lr for lr in ranked if lr not in ("1e-3", "3e-3", "1e-2")]
    if len(beyond) >= 2:
        return None
    if best == ranked[-1] and i + 1 < len(RATES):
        return RATES[i + 1]
    if best == ranked[0] and i > 0:
        return RATES[i - 1]
    return None


def tokens_to(curve, target, tokens):
    """Tokens until the curve's val_loss is at most target, or None."""
    return next((step * tokens for step, loss in curve if loss <= target), None)


def width_table(found, width, tokens):
    print(f"n_embd = {width}:")
    print()
    print("| optimizer | lr | seed 1 final val_loss |")
    print("| --- | --- | --- |")
    for (w, optimizer, lr, seed), curve in sorted(found.items(), key=lambda kv: (kv[0][1], float(kv[0][2]))):
        if w == width and seed == 1:
            print(f"| {optimizer} | {lr} | {curve[-1][1]:.4f} |")
    print()
    best = {o: best_lr(found, width, o) for o in ("adamw", "muon")}
    finals = {o: [c[-1][1] for (w, oo, lr, s), c in found.items() if w == width and oo == o and lr == best[o]]
              for o in best}
    target = statistics.mean(finals["adamw"])
    print(f"| optimizer (best lr) | seeds | final val_loss mean (min .. max) | tokens to AdamW's mean final {target:.4f} (each seed) |")
    print("| --- | --- | --- | --- |")
    for o in ("adamw", "muon"):
        curves = [c for (w, oo, lr, s), c in sorted(found.items()) if w == width and oo == o and lr == best[o]]
        reach = [tokens_to(c, target, tokens) for c in curves]
        text = ", ".join("not reached" if r is None else f"{r:,}" for r in reach)
        f = finals[o]
        print(f"| {o} ({best[o]}) | {len(f)} | {statistics.mean(f):.4f} ({min(f):.4f} .. {max(f):.4f}) | {text} |")
    print()
    return best, target


def table(out, tokens, png=None):
    found = runs(out)
    widths = sorted({w for (w, _, _, _) in found})
    results = {w: width_table(found, w, tokens) for w in widths}
    if not png:
        return
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"(no matplotlib: {png} not written)")
        return
    fig, axes = plt.subplots(1, len(widths), figsize=(6.5 * len(widths), 4.5), squeeze=False)
    for ax, w in zip(axes[0], widths):
        best, target = results[w]
        for o, colour in (("adamw", "tab:blue"), ("muon", "tab:red")):
            for (ww, oo, lr, s), c in sorted(found.items()):
                if ww == w and oo == o and lr == best[o]:
                    ax.plot([step * tokens for step, _ in c], [v for _, v in c], color=colour,
                            alpha=0.8, label=f"{o} lr {lr}" if s == 1 else None)
        ax.axhline(target, color="grey", linestyle=":", label="AdamW's mean final val_loss")
        ax.set_xlabel("tokens")
        ax.set_ylabel("val_loss")
        ax.set_title(f"gpt-tiny (n_embd {w}) on fortunes: 3 seeds each")
        ax.legend()
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    print(f"(plot: {png})")


def cost(out):
    """Median over steps 11-60 of each round, then over the rounds."""
    rows = {}
    for m, metrics in run_metrics(out, r"cost-w(\d+)-(\w+)_(\d+)"):
        lines = [r for r in metrics if r["step"] > 10]
        rows.setdefault((int(m[1]), m[2]), []).append((
            statistics.median(r["time_s"]["optimizer"] for r in lines),
            statistics.median(r["step_time_s"] for r in lines)))
    print("| n_embd | optimizer | opt ms (median of 3 rounds) | step ms | share of the step |")
    print("| --- | --- | --- | --- | --- |")
    for (width, optimizer), rounds in sorted(rows.items()):
        opt = statistics.median(r[0] for r in rounds) * 1e3
        step = statistics.median(r[1] for r in rounds) * 1e3
        print(f"| {width} | {optimizer} | {opt:.1f} | {step:.1f} | {100 * opt / step:.0f}% |")


if __name__ == "__main__":
    a = sys.argv
    if len(a) >= 5 and a[1] in ("best", "edge"):
        found = runs(a[2])
        r = (best_lr if a[1] == "best" else edge)(found, int(a[3]), a[4])
        if r:
            print(r)
    elif len(a) >= 4 and a[1] == "table":
        table(a[2], int(a[3]), a[4] if len(a) > 4 else None)
    elif len(a) >= 3 and a[1] == "cost":
        cost(a[2])
    else:
        sys.exit(__doc__)
