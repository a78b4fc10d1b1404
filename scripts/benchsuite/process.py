"""Running the programs a table measures: argument lists, a deadline each, output captured."""
import os
import subprocess
import sys

# A run that takes longer hangs: the longest here (data prepare of 537 MB with SentencePiece on
# 1 thread, a 1.1B-parameter full fine-tune) take about 10 minutes.
RUN_TIMEOUT_S = 3600
PEAK_RSS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "peak_rss.py")


class BenchError(RuntimeError):
    """A run that failed where the table cannot go on without it."""


def _run(cmd, stdout, stderr, env, timeout, check):
    """subprocess.run of cmd with a deadline; with check, a failure raises BenchError naming the
    command and the last lines of what it captured."""
    cmd = [str(c) for c in cmd]
    try:
        done = subprocess.run(cmd, env=env, stdout=stdout, stderr=stderr, text=True,
                              errors="replace", timeout=timeout, check=False)
    except subprocess.TimeoutExpired as e:
        raise BenchError(f"[bench] {' '.join(cmd)}: no end after {timeout} s") from e
    if check and done.returncode != 0:
        tail = "\n".join((done.stdout or done.stderr or "").splitlines()[-5:])
        raise BenchError(f"[bench] {' '.join(cmd)} exited with {done.returncode}:\n{tail}")
    return done


def run(cmd, *, env=None, timeout=RUN_TIMEOUT_S, stderr=subprocess.STDOUT, check=True):
    """Runs cmd (a list) and returns its standard output, with standard error unless stderr
    says otherwise (None: the bench's own, DEVNULL: discarded)."""
    return _run(cmd, subprocess.PIPE, stderr, env, timeout, check).stdout


def run_quiet(cmd, **kwargs):
    """run with standard error discarded (the `2>/dev/null` of a measured command)."""
    return run(cmd, stderr=subprocess.DEVNULL, **kwargs)


def run_stderr(cmd, *, timeout=RUN_TIMEOUT_S, check=True):
    """Runs cmd and returns its standard error, its standard output discarded (a summary that
    goes to standard error)."""
    return _run(cmd, subprocess.DEVNULL, subprocess.PIPE, None, timeout, check).stderr


def with_peak_rss(cmd, python=sys.executable):
    """cmd under peak_rss.py: its output ends with `max RSS KiB N` (peak_rss.parse_kib)."""
    return [python, PEAK_RSS, *cmd]


def run_to_file(cmd, path, *, timeout=RUN_TIMEOUT_S):
    """Runs cmd with its standard output and error into the file at path (`>path 2>&1`); a
    failure raises BenchError."""
    with open(path, "w") as log:
        _run(cmd, log, subprocess.STDOUT, None, timeout, check=True)
