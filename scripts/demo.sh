#!/usr/bin/env bash
# The quick-start job: installs what is missing, builds, prepares the fortunes corpus, trains the
# character-level GPT of configs/gpt-tiny.toml on a local dp=2 x tp=2 mesh (a few minutes on 2
# cores), and ends as nanoGPT's quick start does, with a few lines sampled from the trained model.
# Extra arguments are config overrides, e.g. scripts/demo.sh --training.steps=200
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/build.sh >/dev/null
[ -f data/fortunes.txt ] || bash scripts/prepare_fortunes.sh
BIN="${BUILD_DIR:-build}/vescale-train"
"$BIN" train configs/gpt-tiny.toml --checkpoint.overwrite=true "$@"
echo
echo "Sampled from the trained model (vescale-train generate, 1 process):"
"$BIN" generate configs/gpt-tiny.toml --checkpoint latest "$@" --parallel.dp=1 --parallel.tp=1 \
  --max-new-tokens 400 --temperature 0.8 --top-k 40 --seed 1
