#!/usr/bin/env bash
# Makes (or reuses) the virtual environment of python/requirements.txt: PyTorch 2.11 with CUDA
# 13.0, transformers, tokenizers, sentencepiece, h5py, numpy, peft... every package pinned with
# its hashes. It lives outside the clone, keyed by the hash of the file's pins and the Python
# version, so every clone on the machine shares it and a change to the pins makes a new one;
# nothing goes into the system Python or pyenv's. Prints the environment's python on the last line of stdout.
#
#   scripts/python-env.sh              # make or reuse; progress on stderr, the python on stdout
#   PY=$(scripts/python-env.sh | tail -1)
#
# Environment:
#   VESCALE_PYTHON_ENVS  where the environments live (default ~/.cache/vescale-train/python)
#   BASE_PYTHON          the interpreter the environment is made from (default python3; 3.10+)
#
# An environment counts as made only once every package is installed and imports (its file
# .ready), so an interrupted run leaves nothing that a later run would take for ready.
# Environments of older pins are left as they are (delete their folders to reclaim ~5 GB each).
set -euo pipefail
cd "$(dirname "$0")/.."

note() { echo "[python-env] $*" >&2; }
die() { echo "[python-env] error: $*" >&2; exit 1; }

REQUIREMENTS=python/requirements.txt
BASE_PYTHON=${BASE_PYTHON:-python3}
ENVS=${VESCALE_PYTHON_ENVS:-${XDG_CACHE_HOME:-$HOME/.cache}/vescale-train/python}

command -v "$BASE_PYTHON" >/dev/null || die "no $BASE_PYTHON on the PATH; set BASE_PYTHON"
version=$("$BASE_PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
"$BASE_PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' ||
  die "$BASE_PYTHON is Python $version; torch 2.11 needs 3.10 or newer (set BASE_PYTHON)"
"$BASE_PYTHON" -c 'import venv, ensurepip' 2>/dev/null ||
  die "$BASE_PYTHON cannot make virtual environments (Debian: apt-get install python3-venv)"

# The pins and hashes alone (not comments): a reworded comment keeps the environment.
key=$(cat <(grep -v '^[[:space:]]*#' "$REQUIREMENTS" | grep -v '^[[:space:]]*$') <(echo "$version") |
  sha256sum | cut -c1-16)
env_dir=$ENVS/py$version-$key
reuse_if_ready() {
  [ -f "$env_dir/.ready" ] || return 0
  note "reusing $env_dir$1"
  echo "$env_dir/bin/python"
  exit 0
}

reuse_if_ready ""
mkdir -p "$ENVS"
exec 9>"$env_dir.lock"
flock 9  # a second run waits for the first, then reuses its environment
reuse_if_ready " (made while this run waited)"
rm -rf "$env_dir"
note "making $env_dir from $REQUIREMENTS (Python $version; the first time downloads ~3.5 GB)"
start=$SECONDS
"$BASE_PYTHON" -m venv "$env_dir"
# --require-hashes: every package, dependencies included, is the one the file names, byte for
# byte; --no-deps: nothing outside the file comes in; --only-binary: no package builds from source.
"$env_dir/bin/python" -m pip install -r "$REQUIREMENTS" --require-hashes --no-deps \
  --only-binary=:all: --quiet --disable-pip-version-check --no-input >&2 ||
  die "pip install -r $REQUIREMENTS failed (above); nothing was kept"
"$env_dir/bin/python" -m pip check >&2 || die "the pinned packages do not fit together (above)"
"$env_dir/bin/python" -c 'import torch, transformers, tokenizers, sentencepiece, h5py, peft' ||
  die "the new environment cannot import its packages (above)"
touch "$env_dir/.ready"
note "made in $((SECONDS - start)) s: $("$env_dir/bin/python" -c 'import torch, transformers
print("torch", torch.__version__, "(CUDA", torch.version.cuda + "), transformers", transformers.__version__)')"
echo "$env_dir/bin/python"
