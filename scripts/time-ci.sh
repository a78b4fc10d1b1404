#!/usr/bin/env bash
# Times CI as it runs: .ci/run on a fresh clone of HEAD in a new temporary folder (issue [32]; the
# table in docs/testing.md). Prints the date, commit, machine, each stage, the total and how busy
# the CPUs were; the whole log is kept in /tmp.
#
#   scripts/time-ci.sh                     # warm: this machine's ccache, pip cache and environment
#   CCACHE_DIR=$(mktemp -d) PIP_CACHE_DIR=$(mktemp -d) VESCALE_PYTHON_ENVS=$(mktemp -d) \
#     scripts/time-ci.sh                   # cold: an empty ccache, pip cache and environment
#
# Run it alone on the machine: anything beside it is in its figures. Needs root, as .ci/run does.
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d /tmp/vescale-time-ci.XXXXXX)
log=$work.log
git clone -q . "$work/vescale-train"
commit=$(git -C "$work/vescale-train" rev-parse --short HEAD)
echo "[time-ci] $(date -u '+%Y-%m-%d %H:%M') UTC, commit $commit, $(nproc) cores," \
  "ccache ${CCACHE_DIR:-default}, pip cache ${PIP_CACHE_DIR:-default}," \
  "environments ${VESCALE_PYTHON_ENVS:-default}; log $log"

cpu_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $6 + $7 + $8, $5 }' /proc/stat; }
read -r busy0 idle0 < <(cpu_ticks)
start=$SECONDS
rc=0
(cd "$work/vescale-train" && bash .ci/run) >"$log" 2>&1 || rc=$?
read -r busy1 idle1 < <(cpu_ticks)

grep -E '^\[ci\]|^\[long tier\]|tests passed|tests failed' "$log" || true
echo "[time-ci] .ci/run exit $rc after $((SECONDS - start)) s; the CPUs were busy" \
  "$(((busy1 - busy0) * 100 / (busy1 - busy0 + idle1 - idle0 + 1)))% of the time"
# The long-tier stamps the run wrote (tests/long_tier.stamps), for a commit of the same tree.
cp "$work/vescale-train/tests/long_tier.stamps" "$work.stamps" 2>/dev/null &&
  echo "[time-ci] the clone's tests/long_tier.stamps: $work.stamps"
rm -rf "$work"
exit $rc
