#!/usr/bin/env bash
# Installs the Debian packages vescale-train needs. Idempotent: installs only what is missing.
# Run as root (or with sudo available).
#   scripts/setup.sh        everything: build, run, test, plot
#   scripts/setup.sh run    only what building and running vescale-train and the demo need
#                           (scripts/demo.sh: about half the download, no test frameworks)
set -euo pipefail

RUN_PACKAGES=(
  # toolchain
  build-essential cmake ninja-build ccache pkg-config
  # LibTorch (CPU) and the Gloo headers its c10d needs
  libtorch-dev libgloo-dev
  # fast BLAS: Debian's reference BLAS makes matmuls ~30x slower
  libopenblas0-pthread
  # libraries
  libcli11-dev libtomlplusplus-dev libhdf5-dev libspdlog-dev libfmt-dev nlohmann-json3-dev
  # compressed JSON-lines corpora (data prepare)
  zlib1g-dev libzstd-dev
  # SentencePiece tokenizers (a plugin: NOTE [SentencePiece plugin])
  libsentencepiece-dev
  # the demo corpus
  fortunes
)
TEST_PACKAGES=(
  clang-format libgtest-dev libgmock-dev
  # test cross-checks
  python3 python3-torch python3-h5py python3-numpy python3-sentencepiece python3-regex
  # scripts/plot_metrics.py
  python3-matplotlib
  # .jsonl.zst corpora in the tests and benchmarks
  zstd
  # scripts/python-env.sh, where python3 is Debian's (the pinned environment of the wheel check)
  python3-venv
)
case "${1:-all}" in
  run) PACKAGES=("${RUN_PACKAGES[@]}") ;;
  all) PACKAGES=("${RUN_PACKAGES[@]}" "${TEST_PACKAGES[@]}") ;;
  *)
    echo "usage: scripts/setup.sh [run|all]" >&2
    exit 2
    ;;
esac

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "[setup] all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "[setup] need root to install: ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi

echo "[setup] installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
echo "[setup] done"
