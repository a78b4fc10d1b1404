#!/usr/bin/env bash
# Downloads (does not install) the Debian 12 packages that a wheel-only CUDA machine lacks: every
# build dependency except LibTorch, CUDA and NCCL, which come with the PyTorch wheel there, plus
# Gloo's headers from Debian 13 (NOTE [Gloo headers]). Run it here, where apt works; carry the
# folder to the other machine and run scripts/setup-cuda.sh there.
#
#   scripts/fetch-cuda-deps.sh            # -> third_party/debs/ (git-ignored), about 5 MB
#   DEBS_DIR=/elsewhere scripts/fetch-cuda-deps.sh
#   DEBIAN_MIRROR=http://... scripts/fetch-cuda-deps.sh   # where Debian 13's packages come from
#
# NOTE [Wheel-only deps]: where a package ships a static archive the build links that one
# (HDF5, szip, zlib, zstd, GoogleTest), so the other machine needs none of their runtime packages; fmt,
# spdlog and toml++ have no archive in Debian and come with their shared runtime package, which
# needs only libc and libstdc++. HDF5 is linked statically on purpose: Debian's libhdf5.so pulls in
# libcurl and OpenSSL (its S3 driver) and their dozen dependencies, while libhdf5.a needs only
# szip and zlib for what this program calls.
#
# NOTE [Gloo headers]: a PyTorch wheel links Gloo into libtorch_cpu.so but ships none of its
# headers, and c10d's ProcessGroupGloo.hpp, which lib/comm/ includes, includes <gloo/...>. Only
# the headers are needed (setup-cuda.sh configures with find_package(Gloo) off), and they must
# declare what that header uses: its GlooStore overrides gloo::rendezvous::Store's has_v2_support,
# multi_get, multi_set, append and add, which Debian 12's Gloo (git 2022-05-18) lacks and Debian
# 13's (git 2023-12-02, libgloo-dev 0.0~git20231202.5354032) has. PyTorch 2.6 builds against that
# Gloo (Debian 13's own libtorch), and the 2.11 wheel compiled against it on 2026-11-26; a later
# wheel whose header uses newer Gloo API would need a newer package (GLOO_SUITE).
set -euo pipefail
cd "$(dirname "$0")/.."

# The one list of what setup-cuda.sh unpacks. Runtime package names are Debian 12's (apt-cache
# depends libfmt-dev libspdlog-dev libtomlplusplus-dev).
PACKAGES=(
  libcli11-dev                        # header-only
  libtomlplusplus-dev libtomlplusplus3
  libfmt-dev libfmt9
  libspdlog-dev libspdlog1.10         # built against libfmt9 (SPDLOG_FMT_EXTERNAL)
  nlohmann-json3-dev                  # header-only
  libgtest-dev                        # static libgtest.a, libgtest_main.a
  libhdf5-dev                         # static hdf5/serial/libhdf5.a and its headers
  libaec-dev                          # static libsz.a, libaec.a: HDF5's szip filter
  zlib1g-dev                          # static libz.a: HDF5's deflate filter, .jsonl.gz corpora
  libzstd-dev                         # static libzstd.a: .jsonl.zst corpora
  libsentencepiece-dev libsentencepiece0  # the SentencePiece plugin's (NOTE [SentencePiece
                                      # plugin]): needs only libc and libstdc++
)                                     # and Gloo's headers: GLOO_PACKAGE below

# NOTE [Gloo headers]: from another Debian release, with its own package lists.
GLOO_PACKAGE=libgloo-dev
GLOO_SUITE=${GLOO_SUITE:-trixie}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

DEBS_DIR=${DEBS_DIR:-third_party/debs}

arch=$(dpkg --print-architecture)
if [ "$arch" != amd64 ]; then
  echo "[fetch-cuda-deps] this machine is $arch; the GPU machines are amd64 (x86-64)" >&2
  exit 1
fi

# Into a fresh folder, which replaces the old one only once every package is there.
fresh=$DEBS_DIR.fetching
rm -rf "$fresh"
mkdir -p "$fresh"
# As root, apt's download sandbox user (_apt) cannot write into a folder root owns; root then
# downloads itself anyway, with a warning. Ask for that directly.
sandbox=()
[ "$(id -u)" -eq 0 ] && sandbox=(-o APT::Sandbox::User=root)
if ! (cd "$fresh" && apt-get "${sandbox[@]}" -q download "${PACKAGES[@]}"); then
  echo "[fetch-cuda-deps] apt-get download failed; if a package was not found, run" \
    "apt-get update first" >&2
  exit 1
fi

# Gloo's headers from $GLOO_SUITE: apt with a sources list and package lists of its own, so this
# system's apt configuration and state stay as they are.
suite_dir=$(mktemp -d)
trap 'rm -rf "$suite_dir"' EXIT
mkdir -p "$suite_dir/lists/partial" "$suite_dir/cache/archives/partial"
echo "deb $DEBIAN_MIRROR $GLOO_SUITE main" >"$suite_dir/sources.list"
suite_apt=(apt-get "${sandbox[@]}" -o Dir::Etc::SourceList="$suite_dir/sources.list"
  -o Dir::Etc::SourceParts=/dev/null -o Dir::State::Lists="$suite_dir/lists"
  -o Dir::Cache="$suite_dir/cache")
if ! "${suite_apt[@]}" -q update >"$suite_dir/update.log" 2>&1 ||
  ! (cd "$fresh" && "${suite_apt[@]}" -q download "$GLOO_PACKAGE/$GLOO_SUITE"); then
  tail -5 "$suite_dir/update.log" >&2
  echo "[fetch-cuda-deps] could not download $GLOO_PACKAGE from Debian $GLOO_SUITE" \
    "($DEBIAN_MIRROR); set DEBIAN_MIRROR to a mirror that has it" >&2
  exit 1
fi

# What setup-cuda.sh checks before it unpacks: every package, at the version fetched, intact.
(
  cd "$fresh"
  for deb in *.deb; do
    # shellcheck disable=SC2016  # dpkg-deb's fields, not the shell's
    echo "$(dpkg-deb -W --showformat='${Package} ${Version}' "$deb") $deb"
  done >MANIFEST
  sha256sum ./*.deb >SHA256SUMS
)
rm -rf "$DEBS_DIR"
mv "$fresh" "$DEBS_DIR"
echo "[fetch-cuda-deps] $(wc -l <"$DEBS_DIR/MANIFEST") packages," \
  "$(du -sh "$DEBS_DIR" | cut -f1) in $DEBS_DIR:"
sed 's/^/  /' "$DEBS_DIR/MANIFEST"
