"""Helpers for end-to-end tests: the real vescale-train binary on real processes."""
import os
import subprocess

BINARY = os.environ.get("VESCALE_TRAIN", "vescale-train")


def run(*args, timeout=300, env=None):
    """Runs vescale-train with `args`; returns the CompletedProcess (text mode)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([BINARY, *args], capture_output=True, text=True, timeout=timeout,
                          env=full_env)


def parse_table(stdout, first_column="dim"):
    """Rows of a whitespace table after its header line (the one starting with `first_column`)."""
    lines = stdout.splitlines()
    for i, line in enumerate(lines):
        if line.split()[:1] == [first_column]:
            header = line.split()
            return [l.split() for l in lines[i + 1:] if l.strip()], header
    raise AssertionError(f"no table with a '{first_column}' header in:\n{stdout}")
