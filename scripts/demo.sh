#!/usr/bin/env bash
# The quick-start job: installs what is missing (the run set of scripts/setup.sh), builds only
# vescale-train (a quick unity build, NOTE [Demo build]), prepares the fortunes corpus, trains the
# character-level GPT of configs/gpt-tiny.toml on a local dp=2 x tp=2 mesh (a few minutes on 2
# cores), and ends as nanoGPT's quick start does, with a few lines sampled from the trained model.
# Each phase is announced with the time since the start. With --bpe it goes from text to text
# through a tokenizer of its own: trains a 2,000-piece SentencePiece BPE on the corpus (tokenizer
# train), tokenizes the corpus (data prepare), trains configs/gpt-tiny-bpe.toml on the tokens and
# prompts it with text.
#
#   scripts/demo.sh                          # the whole demo
#   scripts/demo.sh --bpe                    # the same with a BPE vocabulary (~40 s more)
#   scripts/demo.sh --training.steps=200     # extra arguments are config overrides
set -euo pipefail
cd "$(dirname "$0")/.."

config=configs/gpt-tiny.toml
prompt=()
if [ "${1:-}" = --bpe ]; then
  shift
  config=configs/gpt-tiny-bpe.toml
  prompt=(--prompt "You will")
fi

start=$SECONDS
phase() { printf '[demo %d:%02d] %s\n' $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)) "$*"; }

phase "installing missing packages (scripts/setup.sh run)"
bash scripts/setup.sh run
BUILD_DIR=${BUILD_DIR:-build}
BIN="$BUILD_DIR/vescale-train"
LOG="$BUILD_DIR/demo-build.log"
mkdir -p "$BUILD_DIR"
# NOTE [Demo build]: a new build folder is made for the soonest start: -O1 without debug
# information, lib/ in unity batches of 32 (NOTE [Unity build]; app/ keeps batches of 4). Cold on
# 2 cores (2026-12-02, no ccache) vescale-train built in 128 s; with the default flags (-O2 -g1,
# batches of 8) in 224 s, with -O1 in batches of 16 in 159 s. -O1 trains the demo's 1000 steps as
# fast (146 s against 142 s, the same losses): the time goes to LibTorch and the BLAS, which it
# does not touch. A folder that exists keeps its own flags.
quick=(-DCMAKE_UNITY_BUILD_BATCH_SIZE=32 "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG")
BUILD_TYPE=Release
if [ -f "$BUILD_DIR/CMakeCache.txt" ]; then
  quick=()
  BUILD_TYPE=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$BUILD_DIR/CMakeCache.txt")
fi
phase "building vescale-train (ninja counts the steps; the whole log: $LOG)"
if ! SETUP=run TARGETS=vescale-train BUILD_TYPE=$BUILD_TYPE bash scripts/build.sh \
  -DVESCALE_BUILD_TESTS=OFF -DVESCALE_BUILD_BENCH=OFF ${quick[@]+"${quick[@]}"} 2>&1 |
  tee "$LOG" | sed -un '/^\[[0-9]*\/[0-9]*\]/p'; then
  tail -n 30 "$LOG" >&2
  echo "[demo] the build failed; the whole log is $LOG" >&2
  exit 1
fi
if [ ! -f data/fortunes.txt ]; then
  phase "preparing the corpus"
  bash scripts/prepare_fortunes.sh
fi
if [ $config = configs/gpt-tiny-bpe.toml ]; then
  phase "training a 2,000-piece SentencePiece BPE tokenizer on the corpus"
  "$BIN" tokenizer train data/fortunes.txt --vocab-size 2000 --special '<|endoftext|>' \
    -o data/fortunes-bpe.model
  phase "tokenizing the corpus into data/fortunes-bpe"
  "$BIN" data prepare data/fortunes.txt --tokenizer data/fortunes-bpe.model -o data/fortunes-bpe
fi
phase "training $config"
"$BIN" train $config --checkpoint.overwrite=true "$@"
echo
phase "sampling from the trained model (vescale-train generate, 1 process):"
"$BIN" generate $config --checkpoint latest "$@" --parallel.dp=1 --parallel.tp=1 \
  --max-new-tokens 400 --temperature 0.8 --top-k 40 --seed 1 ${prompt[@]+"${prompt[@]}"}
phase "done"
