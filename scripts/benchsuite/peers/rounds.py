"""Rows run round-robin: every row once a round, so the rows of a round share the machine's
state; each run's tokens/s and peak RSS."""
import sys

from benchsuite import peak_rss, process, trainlog
from benchsuite.peers import commands, settings


def result(output):
    """(tokens/s, peak RSS MiB) of a run's output, or None when it printed no tokens/s."""
    tokens = trainlog.tokens_per_s(output)
    if tokens is None:
        return None
    return float(tokens), float((peak_rss.parse_kib(output) or 0) // 1024)


def run_once(ctx, programs, peer, row, setting):
    """One run of row under setting; (tokens/s, peak RSS MiB), or None (its last 3 lines on
    standard error) when it failed."""
    cmd = commands.command(row, programs, peer.steps, peer.py_args,
                           ctx.path(f"peer-{row.replace('@bf16', '').removeprefix('wheel-')}"))
    try:
        output = process.run(process.with_peak_rss(cmd, programs.system_python),
                             env=settings.run_env(ctx.env, setting), check=False)
    except process.BenchError as e:
        output = str(e)
    found = result(output)
    if found is None:
        print("\n".join("    " + line for line in output.splitlines()[-3:]), file=sys.stderr)
    return found


def rounds(specs, rounds_n, run):
    """{name: [(tokens/s, peak RSS MiB) of each run that finished]} of specs (name, row, setting)
    run round-robin rounds_n times by run(row, setting); a row and setting that two specs name
    runs once a round, for both. Progress on standard error."""
    runs = {name: [] for name, _, _ in specs}
    for r in range(1, rounds_n + 1):
        this_round = {}
        for name, row, setting in specs:
            if (row, setting) not in this_round:
                this_round[(row, setting)] = run(row, setting)
                found = this_round[(row, setting)]
                shown = f"{found[0]:.0f}/{found[1]:.0f}" if found else "failed"
                print(f"  round {r}/{rounds_n}: {name}: {shown}", file=sys.stderr)
            if this_round[(row, setting)]:
                runs[name].append(this_round[(row, setting)])
    return runs

