#!/usr/bin/env bash
# Times the README's quick start as a newcomer meets it: a fresh clone of this repository's HEAD
# in a fresh Debian 12 root (debootstrap --variant=minbase: apt, no compiler, no package of ours,
# an empty ccache), where scripts/demo.sh installs, builds, trains and samples. Prints the
# timeline (packages installed, vescale-train built, training started, done), each line stamped
# with the seconds since the demo began; the whole output is kept in the log it names.
#
#   scripts/time-quick-start.sh                          # the whole demo (1000 steps)
#   scripts/time-quick-start.sh --training.steps=100     # arguments go to scripts/demo.sh
#
# Environment: QUICK_START_ROOT (default /var/cache/vescale-train/debian12-fresh; remade on every
# run), DEBIAN_MIRROR (debootstrap's archive). Needs root (debootstrap, chroot, mount). The
# machine should be otherwise idle: the figures are the README's.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$PWD
ROOT=$(realpath -m "${QUICK_START_ROOT:-/var/cache/vescale-train/debian12-fresh}")
LOG=$ROOT.log

die() {
  echo "[quick-start] error: $*" >&2
  exit 1
}
[ "$(id -u)" -eq 0 ] || die "needs root: debootstrap, chroot and mount (try sudo $0)"
case $ROOT in
  / | /usr | /var | /var/cache | /tmp) die "QUICK_START_ROOT=$ROOT would overwrite a system folder" ;;
esac
command -v debootstrap >/dev/null || die "needs debootstrap (apt-get install debootstrap)"

ROOT_TAG="[quick-start] "
source "$SRC/scripts/lib/debian_root.sh"  # mount_all, unmount_all
trap unmount_all EXIT

unmount_all
rm -rf "$ROOT"
mkdir -p "$(dirname "$ROOT")"  # the logs go beside the root
echo "[quick-start] making a fresh Debian 12 root in $ROOT (not timed)"
debootstrap --variant=minbase bookworm "$ROOT" ${DEBIAN_MIRROR:+"$DEBIAN_MIRROR"} \
  >"$ROOT.debootstrap.log" 2>&1 || die "debootstrap failed (log: $ROOT.debootstrap.log)"
git clone -q --no-hardlinks "$SRC" "$ROOT/root/vescale-train"
mount_all

echo "[quick-start] scripts/demo.sh $* in the root, on a fresh clone of $(git rev-parse --short HEAD)"
start=$SECONDS
set +e  # the demo's exit status is read below, after the timeline
chroot "$ROOT" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  bash -c 'cd /root/vescale-train && scripts/demo.sh "$@"' _ "$@" 2>&1 |
  while IFS= read -r line; do printf '%5d s  %s\n' $((SECONDS - start)) "$line"; done >"$LOG"
status=${PIPESTATUS[0]}
set -e

stamp() { grep -m1 -E "$1" "$LOG" | awk '{ print $1 }'; }
echo "[quick-start] timeline (seconds since scripts/demo.sh began; the whole output: $LOG)"
printf '  %-36s %s s\n' "packages installed" "$(stamp '\[demo [0-9:]+\] building')" \
  "vescale-train built" "$(stamp '\[demo [0-9:]+\] (preparing|training)')" \
  "training started (step 0 validated)" "$(stamp 'step 0/[0-9]+ \| val_loss')" \
  "done (trained, sampled)" "$(stamp '\[demo [0-9:]+\] done')"
[ "$status" -eq 0 ] || die "scripts/demo.sh failed (exit $status); see $LOG"
