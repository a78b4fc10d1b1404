#!/usr/bin/env bash
# Builds the demo corpus: the English text of Debian's `fortunes` package as one UTF-8 file,
# fortunes separated by blank lines (the '%' separators dropped). Usage:
#   scripts/prepare_fortunes.sh [OUT]      (default: data/fortunes.txt)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-data/fortunes.txt}
SRC=/usr/share/games/fortunes
if [ ! -d "$SRC" ]; then
  echo "[prepare] $SRC is missing: run scripts/setup.sh (it installs the fortunes package)" >&2
  exit 1
fi
mkdir -p "$(dirname "$OUT")"
tmp="$OUT.tmp.$$"
# The plain-text databases: no .dat indexes, no .u8 duplicates, no ASCII-art collections.
for f in "$SRC"/*; do
  case "$f" in *.dat|*.u8|*art*) continue ;; esac
  [ -f "$f" ] && sed 's/^%$//' "$f"
done > "$tmp"
mv "$tmp" "$OUT"
echo "[prepare] $OUT: $(wc -c < "$OUT") bytes from $(ls "$SRC" | grep -vc '\.\(dat\|u8\)$') fortune files"
