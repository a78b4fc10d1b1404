"""pipeline: each schedule on gpt-tiny at pp=2 for 4, 8, 16 micro-batches: tokens/s, each rank's
measured bubble against the simulated one, peak RSS and micro-batches in flight."""
import re

from benchsuite import trainlog
from benchsuite.process import run_quiet
from benchsuite.tables import tiny

SCHEDULES = (("gpipe", 1), ("1f1b", 1), ("interleaved-1f1b", 2), ("zbv", 2), ("zb-h1", 1))
MICROBATCHES = (4, 8, 16)


def header():
    """The column names (aligned as printed since the table began, a little off the rows)."""
    return (f"{'schedule':<18} {'m':>4} {'tokens/s':>10} {'bubble r0 / r1':>16} {'simulated':>10} "
            f"{'peak RSS r0 / r1':>22} {'in flight r0 / r1':>22}")


def rank_stats(output, rank):
    """(bubble, peak resident memory, in flight with `stage ` as `s`) of a rank's `pp rank N:`
    line, each '' when absent."""
    for line in output.splitlines():
        if f"pp rank {rank}:" in line:
            bubble = re.search(r"bubble ([0-9.]*%)", line)
            memory = line.split("peak resident memory ")[-1]
            flight = re.search(r"in flight (.*); peak", line)
            return (bubble.group(1) if bubble else "", memory,
                    flight.group(1).replace("stage ", "s") if flight else "")
    return "", "", ""


def simulated(schedule_output):
    """The bubble `plan schedule` simulated: the second word of its `bubble` line."""
    for line in schedule_output.splitlines():
        if line.startswith("bubble"):
            return line.split()[1]
    return ""


def row(schedule, m, tokens, sim, r0, r1):
    """A row from the tokens/s, the simulated bubble and rank_stats of ranks 0 and 1."""
    return (f"{schedule:<18} {m:>4} {tokens:>10} {f'{r0[0]} / {r1[0]}':>16} {sim:>10} "
            f"{f'{r0[1]} / {r1[1]}':>24} {f'{r0[2]} / {r1[2]}':>18}")


def run_row(ctx, schedule, virtual, m):
    """Trains 30 steps on schedule with m micro-batches and returns the row."""
    args = ["--parallel.pp=2", "--parallel.dp=1", "--parallel.tp=1", "--parallel.plan=",
            f"--parallel.pp_schedule={schedule}", f"--parallel.pp_virtual={virtual}",
            f"--parallel.microbatches={m}"]
    output = tiny.train(ctx, f"pp-{schedule}-{m}", 30, *args)
    sim = simulated(run_quiet([ctx.train, "plan", "schedule", tiny.CONFIG, *args], check=False))
    return row(schedule, m, trainlog.tokens_per_s(output) or "", sim, rank_stats(output, 0),
               rank_stats(output, 1))


def run(ctx):
    print("pipeline schedules: configs/gpt-tiny.toml at pp=2 (dp=1, tp=1), float32, 30 steps")
    print(header())
    for m in MICROBATCHES:
        for schedule, virtual in SCHEDULES:
            print(run_row(ctx, schedule, virtual, m))
    print()
