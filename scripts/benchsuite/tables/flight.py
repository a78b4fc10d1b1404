"""flight: what the flight recorder costs: ns a call (vescale-bench-flight), the calls of a step
on each of 4 ranks (their dumps after step 20), their share of the step time, and tokens/s with
the recorder on (4096 entries) and off (0), 3 alternating rounds each."""
import json
import os
import re
import statistics

from benchsuite import markdown, process, trainlog

JOBS = (("dp 2 x tp 2 megatron-tp", []),
        ("pp 2 x tp 2, 4 micro-batches",
         ["--parallel.dp=1", "--parallel.pp=2", "--parallel.microbatches=4"]))
ROUNDS = 3
DUMP_STEP = 20


def ns_a_call(bench_output):
    """The ns a call vescale-bench-flight printed."""
    return re.search(r": ([0-9.]+) ns a call", bench_output).group(1)


def calls_a_step(folder, ranks=4):
    """Per rank, the calls of step DUMP_STEP in its flight dump under folder."""
    calls = []
    for rank in range(ranks):
        with open(os.path.join(folder, "flight", f"rank-{rank}.json")) as f:
            calls.append(sum(1 for e in json.load(f)["entries"] if e["step"] == DUMP_STEP))
    return calls


def row(label, ns, calls, step_times, on, off):
    """A row from the ns a call, each rank's calls a step, the step times (after the first) of
    the run with the recorder, and the tokens/s of the rounds with it on and off."""
    step = statistics.median(step_times)
    cost = max(calls) * float(ns) * 1e-9
    m_on, m_off = statistics.median(on), statistics.median(off)
    return markdown.row(label, ", ".join(map(str, calls)), f"{cost * 1e6:.1f} us",
                        f"{step * 1e3:.1f} ms", f"{100 * cost / step:.3f}%", f"{m_on:,.0f}",
                        f"{m_off:,.0f}", f"{100 * (m_on / m_off - 1):+.1f}%")


def job_row(ctx, label, ns, overrides):
    """Runs the job ROUNDS times with the recorder on and off, alternating, and returns its row."""
    tokens = {4096: [], 0: []}
    for rnd in range(1, ROUNDS + 1):
        for entries in (4096, 0):
            folder = ctx.path(f"flight-{rnd}-{entries}")
            process.run([ctx.train, "train", "configs/gpt-dp2-tp2.toml", f"--job.dump_folder={folder}",
                         "--training.steps=40", "--eval.interval=0", "--eval.windows=1",
                         "--metrics.log_interval=1", f"--comm.flight_recorder_entries={entries}",
                         f"--comm.flight_recorder_dump={DUMP_STEP}", *overrides])
            tokens[entries].append(trainlog.metrics(os.path.join(folder, "metrics.jsonl"))[-1]["tokens_per_s"])
    first = ctx.path("flight-1-4096")
    steps = [m["step_time_s"] for m in trainlog.metrics(os.path.join(first, "metrics.jsonl"))][1:]
    return row(label, ns, calls_a_step(first), steps, tokens[4096], tokens[0])


def run(ctx):
    print()
    bench = process.run([ctx.flight], stderr=None)
    print(bench, end="")
    ns = ns_a_call(bench)
    print("flight recorder on 4 ranks, float32, 40 steps: calls of step 20 per rank (its dump), their cost")
    print(f"at {ns} ns a call against the median step time, and tokens/s with the recorder on and off")
    print(markdown.header("job", "calls a step (ranks 0-3)", "recorder per step", "median step",
                          "share", "tokens/s on", "tokens/s off", "on vs off"))
    for label, overrides in JOBS:
        print(job_row(ctx, label, ns, overrides))
