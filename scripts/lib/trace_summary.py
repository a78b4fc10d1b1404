#!/usr/bin/env python3
"""Where a profiled step's GPU time went, from `train --profile` 's Chrome trace (NOTE [Profile
trace], NOTE [GPU activity]): for each step of rank 0, its span, how long the GPU was busy in it
(the union of its kernels, copies and memsets: the rest is the device waiting for the host) and
how many kernels ran; then the kernels that took the most device time, by name.

    scripts/lib/trace_summary.py TRACE [--top N]

Prints one line a step ("step 3: 41.2 ms, GPU busy 36.0 ms (87%), 1445 kernels") and one a kernel
("  9.8 ms  24%  x148  ampere_bf16_s16816gemm..."); "no GPU activity" when the trace has none (a
CPU run). Exit 2 for a file that is not such a trace.
"""
import argparse
import collections
import json
import sys

GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")


def load_events(path):
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(print(f"trace_summary: {path}: not a readable Chrome trace ({e})", file=sys.stderr) or 2)
    events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        sys.exit(print(f"trace_summary: {path}: no traceEvents list", file=sys.stderr) or 2)
    return [e for e in events if isinstance(e, dict) and e.get("ph") == "X"]


def busy_us(intervals):
    """The length of the union of (start, end) intervals."""
    total, reach = 0.0, None
    for start, end in sorted(intervals):
        if reach is None or start > reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total


def summarize(events, top):
    rank = min((e.get("pid", 0) for e in events), default=0)
    mine = [e for e in events if e.get("pid", 0) == rank]
    steps = [e for e in mine if e.get("cat") == "step"]
    gpu = [e for e in mine if e.get("cat") in GPU_CATEGORIES]
    lines = []
    if not gpu:
        return ["no GPU activity in the trace (a CPU run)"]
    for s in steps:
        start, end = s["ts"], s["ts"] + s["dur"]
        inside = [(max(start, e["ts"]), min(end, e["ts"] + e["dur"])) for e in gpu
                  if e["ts"] < end and e["ts"] + e["dur"] > start]
        kernels = sum(1 for e in gpu if e["cat"] == "kernel" and start <= e["ts"] < end)
        busy = busy_us(inside)
        share = 100 * busy / s["dur"] if s["dur"] > 0 else 0
        lines.append(f"{s['name']}: {s['dur'] / 1e3:.1f} ms, GPU busy {busy / 1e3:.1f} ms "
                     f"({share:.0f}%), {kernels} kernels")
    by_name = collections.defaultdict(lambda: [0.0, 0])
    for e in gpu:
        by_name[e["name"]][0] += e["dur"]
        by_name[e["name"]][1] += 1
    total = sum(t for t, _ in by_name.values()) or 1.0
    for name, (t, n) in sorted(by_name.items(), key=lambda kv: -kv[1][0])[:top]:
        short = name if len(name) <= 90 else name[:87] + "..."
        lines.append(f"  {t / 1e3:7.2f} ms {100 * t / total:3.0f}%  x{n:<5} {short}")
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace")
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args()
    print("\n".join(summarize(load_events(args.trace), args.top)))


if __name__ == "__main__":
    main()
