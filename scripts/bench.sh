#!/usr/bin/env bash
# Benchmarks, each printing a table: the program is scripts/benchsuite (`scripts/bench.sh --help`
# lists the tables, BENCH and the environment). Usage: scripts/bench.sh [--sizes 1K,1M,16M]
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/scripts${PYTHONPATH:+:$PYTHONPATH}"
case ${1:-} in -h | --help) exec python3 -m benchsuite --help ;; esac
# VESCALE_TRAIN and VESCALE_BENCH_PLAIN (as the e2e tests take them) name binaries built elsewhere;
# with both set nothing is built.
[ -n "${VESCALE_TRAIN:-}" ] && [ -n "${VESCALE_BENCH_PLAIN:-}" ] || bash scripts/build.sh >/dev/null
[ -f data/fortunes.txt ] || bash scripts/prepare_fortunes.sh >/dev/null
exec python3 -m benchsuite "$@"
