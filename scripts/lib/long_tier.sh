# Sourced by scripts/test.sh: the long tier (tests/long_tier.txt, docs/testing.md "The long
# tier"). A long-tier test runs when a file it watches differs from when it last passed.
#   long_tier_names             the long tier's ctest names, one a line
#   long_tier_watch NAME        the pathspecs NAME watches
#   long_tier_hash NAME         a hash of the files NAME watches, as they are in the working tree
#   long_tier_stamp NAME        the hash NAME last passed with ("" if never)
#   long_tier_mark_passed NAME HASH  records that NAME passed with its files at HASH
# Paths are relative to the repository root, which must be the current folder.
LONG_TIER_LIST=tests/long_tier.txt
LONG_TIER_STAMPS=tests/long_tier.stamps

long_tier_names() {
  awk '!/^#/ && NF { print $1 }' "$LONG_TIER_LIST"
}

long_tier_watch() {
  awk -v name="$1" '!/^#/ && $1 == name { for (i = 2; i <= NF; i++) print $i }' "$LONG_TIER_LIST"
}

# Tracked files and untracked ones git does not ignore, each file's content and path, in order.
long_tier_hash() {
  local watched f
  mapfile -t watched < <(long_tier_watch "$1")
  [ ${#watched[@]} -gt 0 ] || { echo "long tier: $1 watches nothing in $LONG_TIER_LIST" >&2; return 1; }
  for f in "${watched[@]}"; do
    git ls-files --cached --others --exclude-standard -- "$f" | grep -q . || {
      echo "long tier: $1 watches $f in $LONG_TIER_LIST, which is no file or folder of the tree" >&2
      return 1
    }
  done
  git ls-files -z --cached --others --exclude-standard -- "${watched[@]}" | sort -z |
    while IFS= read -r -d '' f; do
      [ -f "$f" ] && printf '%s %s\n' "$(sha1sum <"$f" | cut -c1-40)" "$f"
    done | sha1sum | cut -c1-16
}

long_tier_stamp() {
  [ -f "$LONG_TIER_STAMPS" ] || return 0
  awk -v name="$1" '$1 == name { print $2 }' "$LONG_TIER_STAMPS"
}

long_tier_mark_passed() {
  local hash=$2 tmp
  tmp=$(mktemp)
  {
    [ -f "$LONG_TIER_STAMPS" ] && awk -v name="$1" '$1 != name && !/^#/' "$LONG_TIER_STAMPS"
    echo "$1 $hash"
  } | sort >"$tmp"
  {
    echo "# Written by scripts/test.sh (scripts/lib/long_tier.sh): each long-tier test and the hash of"
    echo "# the files it watches when it last passed. Commit it with the change that made it."
    cat "$tmp"
  } >"$LONG_TIER_STAMPS"
  rm -f "$tmp"
}
