#!/usr/bin/env bash
# Compiles vescale-train against the newest PyTorch that PyPI serves (python/newest-torch.txt),
# without linking or running it: the wheel's torch/ folder unpacked (its headers, CMake config and
# libraries; not installed, since its CUDA libraries are not this machine's), configured by
# scripts/setup-cuda.sh as the wheel route is (TORCH_FOLDER), and every object file of the
# library, the CUDA kernels, the binary, the tests and the benchmarks built, C++20, warnings as
# errors. What CI runs and tests is PyTorch 2.11 (scripts/test-wheel.sh); this shows that the
# headers of the newest release take our code too, and so bounds the range docs/install.md names.
# A long-tier test (e2e.test_newest_torch) runs it when the build's files change.
#
#   scripts/check-newest-torch.sh            # fetch (~540 MB, once), unpack, configure, compile
#                                            # (8.5 min cold on 2 cores, seconds when nothing changed)
#
# Environment: BUILD_DIR (default build-newest-torch), JOBS (default 2), VESCALE_TORCH_CACHE (where
# the unpacked wheels stay; default ~/.cache/vescale-train/newest-torch), BASE_PYTHON (the python3
# whose pip downloads; default python3).
set -euo pipefail
case ${1:-} in
  "") ;;
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "check-newest-torch: unknown argument $1 (see --help)" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build-newest-torch}
JOBS=${JOBS:-2}
CACHE=${VESCALE_TORCH_CACHE:-$HOME/.cache/vescale-train/newest-torch}
PINS=python/newest-torch.txt

note() { echo "[newest-torch] [${SECONDS}s] $*"; }
die() {
  echo "[newest-torch] error: $*" >&2
  exit 1
}

command -v ninja >/dev/null || die "needs ninja (the object files are its targets)"
version=$(sed -n 's/^torch==\([^ ]*\) .*/\1/p' "$PINS")
[ -n "$version" ] || die "$PINS names no torch==VERSION"
folder=$CACHE/torch-$version-$(sha1sum <"$PINS" | cut -c1-12)

# The wheel's torch/ folder, unpacked once per pin (a lock for checks running side by side).
unpack() {
  mkdir -p "$CACHE"
  exec 9>"$folder.lock"
  flock 9
  if [ -f "$folder/.ready" ]; then
    note "torch $version is unpacked in $folder"
    exec 9>&-  # the lock guards the unpacking only
    return
  fi
  rm -rf "$folder"
  mkdir -p "$folder/wheel"
  note "downloading torch $version (~540 MB)"
  "${BASE_PYTHON:-python3}" -m pip download --quiet --no-deps --require-hashes \
    --only-binary=:all: --platform manylinux_2_28_x86_64 --python-version 3.11 \
    --implementation cp --abi cp311 -r "$PINS" -d "$folder/wheel" ||
    die "pip could not download the wheel of $PINS"
  unzip -q "$folder"/wheel/torch-*.whl 'torch/include/*' 'torch/share/*' 'torch/lib/*' \
    'torch/version.py' -d "$folder" || die "could not unpack $(ls "$folder"/wheel)"
  rm -rf "$folder/wheel"
  touch "$folder/.ready"
  exec 9>&-
  note "unpacked torch $version into $folder ($(du -sh "$folder" | cut -f1))"
}

configure() {
  local log=$BUILD_DIR/configure-newest-torch.log
  mkdir -p "$BUILD_DIR"
  note "configuring $BUILD_DIR through scripts/setup-cuda.sh (log: $log)"
  if ! TORCH_FOLDER=$folder/torch BUILD_DIR=$BUILD_DIR BUILD_TYPE=Release \
    bash scripts/setup-cuda.sh --configure-only -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" \
    -DVESCALE_WERROR=ON -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=16 \
    -DVESCALE_BUILD_BENCH=ON -DVESCALE_TEST_FILES="" -DVESCALE_CUDA_KERNELS=ON >"$log" 2>&1; then
    tail -30 "$log" >&2
    die "the configure step failed against torch $version (log: $log)"
  fi
  grep -E '^-- vescale-train|^\[setup-cuda\] (LibTorch|CUDA|NCCL)' "$log" | sed 's/^/[newest-torch] /'
  grep -q '^-- vescale-train: .*NCCL path ON, C++20, .*CUDA kernels ON' "$log" ||
    die "the configure step did not choose C++20 with NCCL and the CUDA kernels (log: $log)"
}

compile() {
  local objects rc=0 warnings log=$BUILD_DIR/compile.log
  mapfile -t objects < <(ninja -C "$BUILD_DIR" -t targets all | sed -n 's/^\([^:]*\.o\): .*/\1/p')
  [ ${#objects[@]} -gt 0 ] || die "ninja lists no object files in $BUILD_DIR"
  note "compiling ${#objects[@]} object files with $JOBS jobs (log: $log)"
  ninja -C "$BUILD_DIR" -j "$JOBS" "${objects[@]}" >"$log" 2>&1 || rc=$?
  warnings=$(grep -c 'warning' "$log" || true)
  if [ "$rc" -ne 0 ]; then
    grep -E 'error|warning' "$log" | head -40 >&2
    die "compiling against torch $version failed ($warnings warnings; log: $log)"
  fi
  [ "$warnings" -eq 0 ] || {
    grep 'warning' "$log" | head -20 >&2
    die "compiling against torch $version gave $warnings warnings (log: $log)"
  }
  note "every object file compiles against torch $version: 0 warnings"
}

unpack
configure
compile
note "passed in $SECONDS s"
