# Mounting a Debian root made by debootstrap for chroot, and unmounting it on every exit path:
# sourced by scripts/time-quick-start.sh, which sets ROOT first (and
# ROOT_TAG, the prefix of its messages).

# Whatever is mounted at or below the root, deepest first.
mounts_below() { awk -v r="$ROOT/" 'index($2 "/", r) == 1 { print $2 }' /proc/mounts | sort -r; }

unmount_all() {
  local m
  for m in $(mounts_below); do
    umount "$m" 2>/dev/null || umount -l "$m" || echo "${ROOT_TAG:-}warning: $m is still mounted" >&2
  done
}

# proc, and the host's sys and dev as slaves (unmounting them here never unmounts the host's);
# the host's resolver, for apt.
mount_all() {
  mount -t proc proc "$ROOT/proc"
  local d
  for d in sys dev; do
    mount --rbind "/$d" "$ROOT/$d"
    mount --make-rslave "$ROOT/$d"
  done
  cp -L /etc/resolv.conf "$ROOT/etc/resolv.conf"
}
