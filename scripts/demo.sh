#!/usr/bin/env bash
# The quick-start job: installs what is missing, builds, prepares the fortunes corpus, and trains
# the character-level GPT of configs/gpt-tiny.toml on a local dp=2 x tp=2 mesh (a few minutes on
# 2 cores). Extra arguments are config overrides, e.g. scripts/demo.sh --training.steps=200
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/build.sh >/dev/null
[ -f data/fortunes.txt ] || bash scripts/prepare_fortunes.sh
exec "${BUILD_DIR:-build}/vescale-train" train configs/gpt-tiny.toml "$@"
