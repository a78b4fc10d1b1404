#!/usr/bin/env python3
"""scripts/bench.sh's muon table (issue [37]): the runs under OUT named muon-<optimizer>_<lr>_<seed>
(dump folders with metrics.jsonl, validation every few steps).

    muon_table.py best OUT OPTIMIZER        # the lr of OPTIMIZER's lowest final val_loss, seed 1
    muon_table.py table OUT TOKENS [PNG]    # the sweep, the seeds and tokens to AdamW's loss

TOKENS is the tokens of a step. With PNG (and matplotlib) it also plots val_loss against tokens
of each optimizer's best lr, every seed."""
import glob
import json
import os
import statistics
import sys


def runs(out):
    """{(optimizer, lr, seed): [(step, val_loss), ...]} of every run under out."""
    found = {}
    for path in glob.glob(os.path.join(out, "muon-*_*_*", "metrics.jsonl")):
        name = os.path.basename(os.path.dirname(path))[len("muon-"):]
        optimizer, lr, seed = name.split("_")
        with open(path) as f:
            curve = [(r["step"], r["val_loss"]) for r in map(json.loads, f) if "val_loss" in r]
        if curve:
            found[(optimizer, lr, int(seed))] = curve
    return found


def best_lr(found, optimizer):
    sweep = {lr: c[-1][1] for (o, lr, seed), c in found.items() if o == optimizer and seed == 1}
    return min(sweep, key=sweep.get)


def tokens_to(curve, target, tokens):
    """Tokens until the curve's val_loss is at most target, or None."""
    return next((step * tokens for step, loss in curve if loss <= target), None)


def table(out, tokens, png=None):
    found = runs(out)
    print("| optimizer | lr | seed 1 final val_loss |")
    print("| --- | --- | --- |")
    for (optimizer, lr, seed), curve in sorted(found.items(), key=lambda kv: (kv[0][0], float(kv[0][1]))):
        if seed == 1:
            print(f"| {optimizer} | {lr} | {curve[-1][1]:.4f} |")
    print()
    best = {o: best_lr(found, o) for o in ("adamw", "muon")}
    finals = {o: [c[-1][1] for (oo, lr, s), c in found.items() if oo == o and lr == best[o]]
              for o in best}
    target = statistics.mean(finals["adamw"])
    print(f"| optimizer (best lr) | seeds | final val_loss mean (min .. max) | tokens to AdamW's mean final {target:.4f} (each seed) |")
    print("| --- | --- | --- | --- |")
    for o in ("adamw", "muon"):
        curves = [c for (oo, lr, s), c in sorted(found.items()) if oo == o and lr == best[o]]
        reach = [tokens_to(c, target, tokens) for c in curves]
        text = ", ".join("not reached" if r is None else f"{r:,}" for r in reach)
        f = finals[o]
        print(f"| {o} ({best[o]}) | {len(f)} | {statistics.mean(f):.4f} ({min(f):.4f} .. {max(f):.4f}) | {text} |")
    if png:
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print(f"(no matplotlib: {png} not written)")
            return
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for o, colour in (("adamw", "tab:blue"), ("muon", "tab:red")):
            for (oo, lr, s), c in sorted(found.items()):
                if oo == o and lr == best[o]:
                    ax.plot([step * tokens for step, _ in c], [v for _, v in c], color=colour,
                            alpha=0.8, label=f"{o} lr {lr}" if s == 1 else None)
        ax.axhline(target, color="grey", linestyle=":", label="AdamW's mean final val_loss")
        ax.set_xlabel("tokens")
        ax.set_ylabel("val_loss")
        ax.set_title("gpt-tiny on fortunes: AdamW and Muon, 3 seeds each")
        ax.legend()
        fig.tight_layout()
        fig.savefig(png, dpi=100)
        print(f"(plot: {png})")


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "best":
        print(best_lr(runs(sys.argv[2]), sys.argv[3]))
    elif len(sys.argv) >= 4 and sys.argv[1] == "table":
        table(sys.argv[2], int(sys.argv[3]), sys.argv[4] if len(sys.argv) > 4 else None)
    else:
        sys.exit(__doc__)
