"""Prints the tables BENCH selects (scripts/bench.sh's program; --help: the package's docstring)."""
import os
import sys
import tempfile

import benchsuite
from benchsuite import context, selection, tables
from benchsuite.process import BenchError


def main(argv):
    """Prints the tables BENCH names; 1 when a name or a run fails."""
    if argv[:1] in (["-h"], ["--help"]):
        print(benchsuite.__doc__.strip())
        return 0
    sys.stdout.reconfigure(line_buffering=True)  # the measured programs write to it too
    try:
        names = selection.selected(os.environ.get("BENCH"))
        with tempfile.TemporaryDirectory() as out:
            ctx = context.from_env(os.environ, argv, out)
            for name in names:
                tables.TABLES[name](ctx)
    except (selection.SelectionError, BenchError) as e:
        print(e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
