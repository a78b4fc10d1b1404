#!/usr/bin/env python3
"""Plots training curves of one or several runs, overlaid: loss and val_loss against step, and
tokens/s against step, from each run's <RUN_DIR>/metrics.jsonl (one JSON object a line with step,
loss, optional val_loss, tokens_per_s; lines without a step and a loss are skipped).

    scripts/plot_metrics.py outputs/run-a outputs/run-b -o curves.png

Needs Debian's python3-matplotlib (scripts/setup.sh installs it)."""
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display needed
import matplotlib.pyplot as plt  # noqa: E402


def read_metrics(run_dir):
    """The step records of run_dir/metrics.jsonl, in file order."""
    path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.exists(path):
        sys.exit(f"error: {path}: no such file (is {run_dir} a run's dump folder?)")
    records = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"error: {path}:{number}: not JSON: {e}")
            if "step" in record and "loss" in record:
                records.append(record)
    if not records:
        sys.exit(f"error: {path}: no lines with a step and a loss")
    return records


def series(records, key):
    """(steps, values) of the records that have `key`."""
    pairs = [(r["step"], r[key]) for r in records if r.get(key) is not None]
    return [s for s, _ in pairs], [v for _, v in pairs]


def plot_run(loss_ax, speed_ax, label, records, width):
    line, = loss_ax.plot(*series(records, "loss"), label=f"{label} loss", linewidth=width)
    steps, values = series(records, "val_loss")
    if steps:
        loss_ax.plot(steps, values, "o--", color=line.get_color(), markersize=4,
                     label=f"{label} val_loss")
    speed_ax.plot(*series(records, "tokens_per_s"), color=line.get_color(), label=label,
                  linewidth=width)


def labels_for(run_dirs):
    """Each run's folder name, or its path where two runs share a name."""
    names = [os.path.basename(os.path.normpath(d)) for d in run_dirs]
    return [n if names.count(n) == 1 else os.path.normpath(d) for n, d in zip(names, run_dirs)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", metavar="RUN_DIR", help="a run's dump folder")
    parser.add_argument("-o", "--output", default="curves.png", help="image file (png, svg, pdf)")
    parser.add_argument("--title", default=None, help="figure title")
    args = parser.parse_args()

    fig, (loss_ax, speed_ax) = plt.subplots(1, 2, figsize=(10, 3.6), dpi=100)
    for i, (label, run_dir) in enumerate(zip(labels_for(args.runs), args.runs)):
        # Earlier runs drawn wider, so runs whose curves coincide stay visible under later ones.
        plot_run(loss_ax, speed_ax, label, read_metrics(run_dir), width=max(1.0, 3.0 - 0.8 * i))
    loss_ax.set(xlabel="step", ylabel="loss", title="loss")
    speed_ax.set(xlabel="step", ylabel="tokens/s", title="throughput")
    for ax in (loss_ax, speed_ax):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    if args.title:
        fig.suptitle(args.title)
    fig.tight_layout()
    fig.savefig(args.output)
    print(f"wrote {args.output} ({len(args.runs)} runs)")


if __name__ == "__main__":
    main()
