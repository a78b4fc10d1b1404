"""What vescale-train (and the peers) report: the `done:` line and metrics.jsonl."""
import json
import re

_TOKENS = re.compile(r"done: .*, (\d+) tokens/s")
_PEAK = re.compile(r"peak RSS (.*)$")


def done_lines(output):
    """The lines of output that say `done:` (vescale-train's summary, a peer's `peer done:`)."""
    return [line for line in output.splitlines() if "done:" in line]


def tokens_per_s(output):
    """The tokens/s of the last `done: ..., N tokens/s` line, as its text, or None."""
    found = [m.group(1) for m in map(_TOKENS.search, output.splitlines()) if m]
    return found[-1] if found else None


def peak_rss(output):
    """The `peak RSS X` ending the first `done:` line (e.g. `241.1MiB`), or ''."""
    for line in done_lines(output):
        m = _PEAK.search(line)
        if m:
            return m.group(1)
    return ""


def summary(output):
    """What follows `done: ` on each `done:` line, one a line."""
    return "\n".join(line.rsplit("done: ", 1)[-1] for line in done_lines(output))


def metrics(path):
    """Every line of a metrics.jsonl, parsed."""
    with open(path) as f:
        return [json.loads(line) for line in f]


def step_metrics(path):
    """The lines of a metrics.jsonl that report a step (those with step_time_s)."""
    with open(path) as f:
        return [json.loads(line) for line in f if '"step_time_s"' in line]
