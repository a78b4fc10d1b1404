#!/bin/bash
# Rewrites the generated parts of docs/ from the binary: the config reference in
# docs/configuration.md (between its BEGIN and END markers). Usage: scripts/update-docs.sh [BINARY]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-build/vescale-train}
[ -x "$BIN" ] || { echo "update-docs: $BIN is not built (scripts/build.sh)" >&2; exit 1; }
python3 - "$BIN" <<'PY'
import subprocess, sys
page = "docs/configuration.md"
begin, end = "<!-- BEGIN config reference -->", "<!-- END config reference -->"
text = open(page).read()
table = subprocess.run([sys.argv[1], "config", "reference"], check=True,
                       capture_output=True, text=True).stdout
head, rest = text.split(begin)
_, tail = rest.split(end)
open(page, "w").write(f"{head}{begin}\n{table}{end}{tail}")
print(f"update-docs: {page} regenerated ({table.count(chr(10))} lines)")
PY
