#!/usr/bin/env bash
# Pins python/requirements.in into python/requirements.txt: every package, dependencies included,
# at one version with the hashes of all its files on PyPI (so one file serves Python 3.11 here
# and 3.12 on the GPU machines), then checks that scripts/python-env.sh makes an environment
# from it. pip-compile runs in a throwaway environment made from python/pin-tools.txt (pinned the
# same way). Commit both files; a new requirements.txt makes a new environment on every machine.
#
#   scripts/pin-python.sh            # after editing python/requirements.in
set -euo pipefail
cd "$(dirname "$0")/.."

tools=$(mktemp -d /tmp/vescale-pin-tools.XXXXXX)
trap 'rm -rf "$tools"' EXIT
"${BASE_PYTHON:-python3}" -m venv "$tools"
"$tools/bin/python" -m pip install -r python/pin-tools.txt --require-hashes --no-deps \
  --quiet --disable-pip-version-check
"$tools/bin/pip-compile" --quiet --generate-hashes --allow-unsafe --strip-extras --no-header \
  --annotation-style=line --no-emit-find-links --output-file python/requirements.txt \
  python/requirements.in
sed -i '1i # Written by scripts/pin-python.sh from requirements.in: every package with the hashes of its files.' \
  python/requirements.txt
echo "[pin-python] python/requirements.txt: $(grep -c '==' python/requirements.txt) packages pinned"
bash scripts/python-env.sh >/dev/null
