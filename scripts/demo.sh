#!/usr/bin/env bash
# The quick-start job: builds vescale-train and runs the communication check on a local
# pp=1 x dp=2 x tp=2 mesh of 4 processes.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/build.sh >/dev/null
exec "${BUILD_DIR:-build}/vescale-train" comm bench --nproc 4 --mesh pp=1,dp=2,tp=2 "$@"
