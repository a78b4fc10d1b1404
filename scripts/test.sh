#!/usr/bin/env bash
# The test suite: installs what is missing, builds, and runs the tests with ctest: every test,
# but a long-tier test (tests/long_tier.txt) only when a file it watches changed since it last
# passed (docs/testing.md, "The long tier").
# Usage: scripts/test.sh                # what CI runs
#        scripts/test.sh --all          # every test, the long tier included
#        scripts/test.sh -R DeviceMesh  # arguments go to ctest, which runs what they select
# A passing run records the long-tier tests it ran in tests/long_tier.stamps: commit that file.
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/lib/stage_clock.sh
source scripts/lib/long_tier.sh
mode=changed
if [ "${1:-}" = --all ]; then
  mode=all
  shift
elif [ $# -gt 0 ]; then
  mode=asked
fi

if [ -z "${VESCALE_PACKAGES_READY:-}" ]; then  # set by .ci/run, which installed them
  stage_begin packages
  bash scripts/setup.sh all
  stage_end
fi
# Tests and benchmarks on, should the demo have made the build folder without them.
bash scripts/build.sh -DVESCALE_BUILD_TESTS=ON -DVESCALE_BUILD_BENCH=ON

skipped=() ran=() ran_hashes=()
if [ $mode != asked ]; then
  # A name that is no test would never run: refuse it, and a tier past its 10.
  known=$(cd "${BUILD_DIR:-build}" && ctest -N | sed -n 's/^ *Test *#[0-9]*: //p')
  names=$(long_tier_names)
  count=$(wc -w <<<"$names")
  [ "$count" -le 10 ] || { echo "error: $LONG_TIER_LIST lists $count tests; the long tier holds 10 at most" >&2; exit 2; }
  for name in $names; do
    grep -qxF "$name" <<<"$known" || {
      echo "error: $LONG_TIER_LIST names $name, which is not a test of the suite (ctest -N)" >&2
      exit 2
    }
    hash=$(long_tier_hash "$name")
    if [ $mode = changed ] && [ "$hash" = "$(long_tier_stamp "$name")" ]; then
      skipped+=("$name")
      echo "[long tier] skips $name: the files it watches are as when it last passed"
    else
      ran+=("$name") ran_hashes+=("$hash")
      [ $mode = all ] || echo "[long tier] runs $name: a file it watches changed since it last passed"
    fi
  done
fi
exclude=()
if [ ${#skipped[@]} -gt 0 ]; then
  exclude=(-E "$(printf '%s\n' "${skipped[@]}" | sed 's/[].[\*^$()+?{|]/\\&/g; s/.*/^&$/' | paste -sd'|')")
fi

stage_begin ctest
rc=0
(cd "${BUILD_DIR:-build}" && ctest -j "${JOBS:-2}" --output-on-failure --timeout 900 "${exclude[@]}" "$@") || rc=$?
stage_end
if [ $rc -eq 0 ]; then
  for i in "${!ran[@]}"; do long_tier_mark_passed "${ran[$i]}" "${ran_hashes[$i]}"; done
  [ ${#ran[@]} -eq 0 ] || echo "[long tier] ${#ran[@]} passed: tests/long_tier.stamps records them"
fi
exit $rc
