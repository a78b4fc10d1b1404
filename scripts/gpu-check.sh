#!/usr/bin/env bash
# Checks vescale-train on a GPU machine in one call (docs/design.md §18 "One GPU check"; --help
# says what it checks). The program is the Python package scripts/gpucheck/ (the standard library
# only); PYTHON_HARNESS names the python3 that runs it, PYTHON the one the peers run under.
scripts=$(cd "$(dirname "$0")" && pwd) || exit 2
PYTHONPATH="$scripts${PYTHONPATH:+:$PYTHONPATH}" exec "${PYTHON_HARNESS:-python3}" -m gpucheck "$@"
