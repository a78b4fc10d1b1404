#!/usr/bin/env bash
# The CUDA build check: builds vescale-train the way a machine with only a PyTorch wheel builds it
# (scripts/setup-cuda.sh: every dependency but LibTorch, CUDA and NCCL from the Debian packages
# scripts/fetch-cuda-deps.sh downloads, unpacked into a prefix), with Debian 13's CUDA LibTorch
# 2.6 (CUDA 12.4, NCCL 2.22, GCC 14) standing in for the wheel, inside a Debian 13 root made with
# debootstrap; as C++20, with CUDA and NCCL on and VESCALE_WERROR=ON; then runs there the tests
# that the Debian 12 suite cannot stand for (NOTE [What the CUDA check runs]). So the wheel route
# is compiled on every change and CI has no third build.
#
#   scripts/test-cuda-build.sh                  # make or reuse the root, build, run the CUDA tests
#   scripts/test-cuda-build.sh -R Collectives   # arguments go to ctest instead of the CUDA subset
#   scripts/test-cuda-build.sh --all            # every test of the suite, as the Debian 12 build
#   scripts/test-cuda-build.sh --set-up         # only make or update the root (CI runs this beside
#                                               # the Debian 12 build: it is mostly downloads)
#
# NOTE [What the CUDA check runs]: the Debian 12 build already compiles and runs every test; what
# only this build can show is (1) that every file compiles without a warning as C++20 under GCC
# 14 against LibTorch 2.6's headers, with the CUDA-only files (lib/comm/nccl_backend.cpp,
# lib/core/gpu_memory.cpp, lib/train/gpu_activity.cpp) in place of their CPU stubs, and (2) what
# those files and LibTorch 2.6 do at run time on a machine without a GPU. So it builds
# vescale-train and the test binary (unity build, as the Debian 12 build; no benchmarks) and runs
# the tests those files feed: the backend choice and NCCL's refusals (Backends, Collectives,
# PointToPoint, FastPaths' build summary, JobConfig), the metrics' GPU memory (Metrics), the
# device tables (Device, PeakFlops, KernelTable, LinearCrossEntropy, FusedLoss), every op rule
# against LibTorch 2.6's single-device op (OpRules), and three runs of the real binary: the fused
# loss, a Llama, and the profiler's trace (e2e.test_fused_loss, test_llama, test_flight_recorder).
# It compiles only the test files those tests are in (CUDA_CHECK_TEST_FILES, with tests/support)
# and runs every C++ test they hold, so `--all` and -R arguments reconfigure the build with every
# test file first. A change to what those files do adds its test file to that list.
#
# Environment:
#   VESCALE_CUDA_ROOT  the Debian 13 root (default /var/cache/vescale-train/debian13-cuda; about
#                      11 GB). Made on the first run (about 5 minutes and 2.9 GB of packages), then
#                      reused: later runs install only what is missing and rebuild only what
#                      changed (the root's own ccache). Delete the folder to start afresh.
#   DEBIAN_MIRROR      the archive debootstrap fetches from (default: debootstrap's own)
#   JOBS               build and ctest jobs (default 2)
#   CXX_STANDARD       the C++ standard of the build (default 20: PyTorch 2.12 and later need it)
#
# Needs root (debootstrap, chroot, mount). The working tree (tracked files and untracked ones git
# does not ignore) is copied into the root on every run; build/ and other ignored folders are not.
# Mounts (proc, sys, dev) are undone on every exit path, an interrupt included.
#
# NOTE [cuDNN stand-in]: Debian's libtorch_cuda.so needs libcudnn.so.9, which Debian ships only
# as an installer (nvidia-cudnn) that downloads cuDNN from NVIDIA; it is declined here. To let the
# CUDA build link and load, this script compiles a library of that name whose every function
# prints that it is a stand-in and aborts. It is a link-time stand-in for this check only: it
# lives only inside the Debian 13 root, is never shipped, and nothing runs it on a machine without
# a GPU (LibTorch calls cuDNN only for CUDA tensors). A GPU machine uses its own cuDNN.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$PWD

ROOT=${VESCALE_CUDA_ROOT:-/var/cache/vescale-train/debian13-cuda}
JOBS=${JOBS:-2}
CXX_STANDARD=${CXX_STANDARD:-20}
SUITE=trixie
# NOTE [What the CUDA check runs] above: the test files (under tests/) of the C++ tests it runs;
# the test binary is built from these alone, so every C++ test it holds runs (ctest names that do
# not start with "e2e"), and so do these three end-to-end tests.
CUDA_CHECK_TEST_FILES="comm/group_test.cpp;kernels/fast_paths_test.cpp;config/job_config_test.cpp;\
train/metrics_test.cpp;core/device_test.cpp;train/peak_flops_test.cpp;kernels/kernel_table_test.cpp;\
dtensor/linear_cross_entropy_test.cpp;train/fused_loss_test.cpp;dtensor/ops_test.cpp"
CUDA_CHECK_TESTS='^[^e]|^e2e\.test_(fused_loss|llama|flight_recorder)$'
STANDIN_DIR=/usr/local/lib/vescale-ci-cudnn-standin

# The one list of what the root installs: the toolchain, Debian 13's CUDA LibTorch (the wheel's
# stand-in) with the NCCL it is built with, CUDA 12.4, and what the tests run (setuptools: the
# peer's torch.compile on the CPU, whose inductor imports it). The libraries the
# project builds against come from the prefix, as on a wheel-only machine (scripts/setup-cuda.sh).
PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config binutils
  libtorch-cuda-dev nvidia-cuda-toolkit nvidia-cuda-dev libnccl-dev
  libopenblas0-pthread
  python3 python3-torch-cuda python3-h5py python3-numpy python3-setuptools fortunes
)

SET_UP_ONLY=0
if [ "${1:-}" = --set-up ]; then
  SET_UP_ONLY=1
  shift
fi

note() { echo "[cuda-build] [${SECONDS}s] $*"; }
die() {
  echo "[cuda-build] error: $*" >&2
  exit 1
}

[ "$(id -u)" -eq 0 ] || die "needs root: debootstrap, chroot and mount (try sudo $0)"
ROOT=$(realpath -m "$ROOT")
case $ROOT in
  / | /usr | /var | /var/cache | /tmp) die "VESCALE_CUDA_ROOT=$ROOT would overwrite a system folder" ;;
esac

# mounts_below, mount_all, unmount_all
ROOT_TAG="[cuda-build] "
source "$SRC/scripts/lib/debian_root.sh"

on_exit() {
  local rc=$?
  unmount_all
  exit "$rc"
}

# chroot with a clean environment: nothing of this shell's (LD_LIBRARY_PATH, ccache settings)
# leaks into the Debian 13 tools.
in_root() {
  chroot "$ROOT" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    DEBIAN_FRONTEND=noninteractive CCACHE_DIR=/var/cache/ccache CI="${CI:-}" "$@"
}

make_root() {
  if [ -f "$ROOT/.vescale-root-ready" ]; then
    note "reusing the Debian 13 root $ROOT"
    return
  fi
  [ -z "$(mounts_below)" ] || die "$ROOT has mounts below it; unmount them first"
  command -v debootstrap >/dev/null || {
    note "installing debootstrap"
    { apt-get update -q && apt-get install -y -q debootstrap; } >/dev/null ||
      die "apt-get install debootstrap failed"
  }
  note "making a Debian 13 root in $ROOT (debootstrap, about a minute)"
  rm -rf "$ROOT"
  mkdir -p "$(dirname "$ROOT")"
  local log=$ROOT.debootstrap.log
  if ! debootstrap --variant=minbase --components=main,contrib,non-free "$SUITE" "$ROOT" \
    ${DEBIAN_MIRROR:+"$DEBIAN_MIRROR"} >"$log" 2>&1; then
    tail -20 "$log" >&2
    die "debootstrap failed (log: $log)"
  fi
  touch "$ROOT/.vescale-root-ready"
}

is_installed() {
  in_root dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

install_packages() {
  local missing=() p
  for p in "${PACKAGES[@]}"; do
    is_installed "$p" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    note "all ${#PACKAGES[@]} packages present"
    return
  fi
  # nvidia-cudnn would download cuDNN from NVIDIA: decline, and it installs nothing.
  echo 'nvidia-cudnn nvidia-cudnn/question select I Decline' | in_root debconf-set-selections
  note "installing ${#missing[@]} packages: ${missing[*]}"
  local log=/var/log/vescale-apt.log
  if ! in_root bash -c 'apt-get update -q && apt-get install -y -q --no-install-recommends "$@"' \
    _ "${missing[@]}" >"$ROOT$log" 2>&1; then
    tail -20 "$ROOT$log" >&2
    die "apt-get in the root failed (log: $ROOT$log)"
  fi
  for p in "${missing[@]}"; do
    is_installed "$p" || die "$p is still not installed in the root (log: $ROOT$log)"
  done
  note "installed ($(du -sh --exclude=proc --exclude=sys --exclude=dev "$ROOT" 2>/dev/null | cut -f1) in the root)"
}

# NOTE [cuDNN stand-in] above.
make_cudnn_standin() {
  if in_root bash -c 'ldconfig -p | grep -q "libcudnn.so.9 "'; then return; fi
  note "building the link-time cuDNN stand-in (never shipped; see NOTE [cuDNN stand-in])"
  in_root bash -euo pipefail -c '
    dir='"$STANDIN_DIR"'
    mkdir -p "$dir"
    syms=$(for lib in /usr/lib/x86_64-linux-gnu/libtorch*.so*; do
             readelf -d "$lib" 2>/dev/null | grep -q "NEEDED.*libcudnn" || continue
             objdump -T "$lib" | awk "\$3 == \"*UND*\" && \$NF ~ /^cudnn/ { print \$NF }"
           done | sort -u)
    [ -n "$syms" ] || { echo "no cuDNN symbols found in LibTorch" >&2; exit 1; }
    {
      echo "/* A link-time stand-in for libcudnn.so.9 (scripts/test-cuda-build.sh). Never shipped. */"
      echo "#include <stdio.h>"
      echo "#include <stdlib.h>"
      echo "static void standin(const char* name) {"
      echo "  fprintf(stderr, \"%s: this libcudnn.so.9 is a link-time stand-in for the CUDA build check, not cuDNN\\n\", name);"
      echo "  abort();"
      echo "}"
      for s in $syms; do echo "int $s(void) { standin(\"$s\"); return 0; }"; done
    } >"$dir/cudnn_standin.c"
    # LibTorch asks for each symbol at version libcudnn.so.9, as cuDNN 9 defines them.
    echo "libcudnn.so.9 { global: *; };" >"$dir/cudnn_standin.map"
    cc -shared -fPIC -O1 -Wl,-soname,libcudnn.so.9 -Wl,--version-script,"$dir/cudnn_standin.map" \
      -o "$dir/libcudnn.so.9" "$dir/cudnn_standin.c"
    echo "$dir" >/etc/ld.so.conf.d/vescale-ci-cudnn-standin.conf
    ldconfig
    echo "[cuda-build] stand-in: $(echo "$syms" | wc -l) functions in $dir/libcudnn.so.9"
  '
}

copy_tree() {
  local dest=$ROOT/vescale-train/src f changed=0 removed=0
  local -A listed=()
  mkdir -p "$dest"
  # Tracked files and untracked ones git does not ignore, as they are in the working tree. Only
  # files whose content changed replace their copies (stamped now), and files gone from the tree
  # are removed: the build in the root stays incremental across checkouts, whose files all carry
  # new times (a fresh clone's, for one).
  while IFS= read -r -d '' f; do
    [ -e "$SRC/$f" ] || continue  # deleted in the working tree, not yet in git
    listed["./$f"]=1
    cmp -s "$SRC/$f" "$dest/$f" && continue
    mkdir -p "$(dirname "$dest/$f")"
    cp --preserve=mode "$SRC/$f" "$dest/$f"
    changed=$((changed + 1))
  done < <(cd "$SRC" && git ls-files -z --cached --others --exclude-standard)
  while IFS= read -r -d '' f; do
    [ -n "${listed[$f]:-}" ] && continue
    rm -f "$dest/$f"
    removed=$((removed + 1))
  done < <(cd "$dest" && find . -type f -print0)
  note "copied $SRC into the root: $changed files new or changed, $removed removed"
}

# The packages setup-cuda.sh unpacks, fetched here (where apt works) into the root.
fetch_debs() {
  note "fetching the wheel route's packages (scripts/fetch-cuda-deps.sh)"
  DEBS_DIR=$ROOT/vescale-train/debs bash "$SRC/scripts/fetch-cuda-deps.sh" >"$ROOT.fetch.log" 2>&1 || {
    tail -20 "$ROOT.fetch.log" >&2
    die "fetching the packages failed (log: $ROOT.fetch.log)"
  }
  note "$(wc -l <"$ROOT/vescale-train/debs/MANIFEST") packages for the prefix"
}

build() {
  # Only the CUDA tests' files, unless other tests were asked for (-R, --all): then all of them.
  local test_files=$CUDA_CHECK_TEST_FILES
  [ $# -eq 0 ] || test_files=""
  note "configuring through scripts/setup-cuda.sh (Debian 13's LibTorch as the wheel, C++$CXX_STANDARD)"
  # -O2 as the Debian 12 build's RelWithDebInfo (the same optimiser warnings), without its debug
  # information, which nobody reads here and which costs compile time and disk.
  local log=$ROOT/vescale-train/configure.log
  if ! in_root env DEBS_DIR=/vescale-train/debs PREFIX=/vescale-train/prefix \
    BUILD_DIR=/vescale-train/build BUILD_TYPE=Release \
    TORCH_CMAKE_PREFIX=/usr/lib/x86_64-linux-gnu/cmake \
    bash /vescale-train/src/scripts/setup-cuda.sh --configure-only \
    -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" -DVESCALE_WERROR=ON -DCMAKE_UNITY_BUILD=ON \
    -DVESCALE_BUILD_BENCH=OFF -DVESCALE_TEST_FILES="$test_files" \
    -DVESCALE_CXX_STANDARD="$CXX_STANDARD" >"$log" 2>&1; then
    tail -30 "$log" >&2
    die "the wheel-route configure failed (log: $log)"
  fi
  grep -E '^-- vescale-train|^\[setup-cuda\]' "$log" | sed 's/^/[cuda-build] /'
  grep -q '^-- vescale-train: .*NCCL path ON' "$log" ||
    die "the configure step did not choose the CUDA + NCCL path (log: $log)"
  grep -q "^-- vescale-train: .*C++$CXX_STANDARD" "$log" ||
    die "the configure step did not choose C++$CXX_STANDARD (log: $log)"
  note "building with $JOBS jobs (log: $ROOT/vescale-train/build.log)"
  local rc=0
  in_root cmake --build /vescale-train/build -j "$JOBS" --target vescale-train vescale_tests \
    >"$ROOT/vescale-train/build.log" 2>&1 || rc=$?
  # Debian 13's libtorch_cpu.so needs libfmt.so.10 and the prefix's spdlog libfmt.so.9, so ld
  # warns that the two "may conflict" when it links the binaries. They cannot: fmt 9 and 10 keep
  # their symbols in different inline namespaces (fmt::v9, fmt::v10), and the tests run the
  # binaries. A wheel has no libfmt.so (its fmt is header-only), so this is the stand-in's alone;
  # every other warning fails the check.
  local stand_in='libfmt\.so\.10, needed by .*libtorch.*, may conflict with libfmt\.so\.9'
  local warnings stand_in_warnings
  stand_in_warnings=$(grep -c "warning: $stand_in" "$ROOT/vescale-train/build.log" || true)
  warnings=$(grep 'warning:' "$ROOT/vescale-train/build.log" | grep -cv "$stand_in" || true)
  if [ "$rc" -ne 0 ]; then
    grep -E 'error|warning' "$ROOT/vescale-train/build.log" | head -40 >&2
    die "the build failed ($warnings warnings; log: $ROOT/vescale-train/build.log)"
  fi
  note "built: $warnings warnings (and $stand_in_warnings of ld's about Debian 13's libfmt.so.10 beside the prefix's libfmt.so.9, which the fmt namespaces keep apart)"
  [ "$warnings" -eq 0 ] || {
    grep 'warning:' "$ROOT/vescale-train/build.log" | grep -v "$stand_in" | head -20 >&2
    die "the build has warnings"
  }
  in_root /vescale-train/build/vescale-train --version | sed 's/^/[cuda-build] /'
}

# Tests skip only with a reason: print each (ctest lists skipped C++ tests; the e2e tests'
# unittest skips are in their output).
report_skips() {
  local log=$ROOT/vescale-train/build/Testing/Temporary/LastTest.log
  [ -f "$log" ] || return 0
  awk '/^\[ RUN      \]/ { test = $4 }
       /: Skipped$/ { getline reason; print "[cuda-build] skipped: " test ": " reason }
       / \.\.\. skipped / { sub(/^ +/, ""); print "[cuda-build] skipped: " $0 }' "$log"
}

run_tests() {
  if [ $# -eq 0 ]; then
    set -- -R "$CUDA_CHECK_TESTS"
    note "running the tests the CUDA build alone can show (NOTE [What the CUDA check runs])"
  elif [ "$1" = --all ]; then
    shift
  fi
  note "running ctest with $JOBS jobs"
  local rc=0
  in_root bash -c 'cd /vescale-train/build && exec ctest -j "$1" --output-on-failure --timeout 900 "${@:2}"' \
    _ "$JOBS" "$@" 2>&1 | tee "$ROOT/vescale-train/ctest.log" || rc=$?
  report_skips
  return "$rc"
}

mkdir -p "$(dirname "$ROOT")"
exec 9>"$ROOT.lock"
flock -n 9 || die "another test-cuda-build.sh is using $ROOT"
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

source "$SRC/scripts/lib/stage_clock.sh"
# After a --set-up run (.ci/run's, beside the Debian 12 stages) this stage only checks the root.
root_stage="CUDA root set-up"
[ -z "${VESCALE_CUDA_ROOT_READY:-}" ] || root_stage="CUDA root check"
stage_begin "$root_stage"
make_root
unmount_all  # a run killed by SIGKILL leaves its mounts
mount_all
install_packages
make_cudnn_standin
copy_tree
fetch_debs
stage_end
if [ $SET_UP_ONLY = 1 ]; then
  note "the root is ready (--set-up: not building)"
  exit 0
fi
stage_begin "CUDA build"
build "$@"
stage_end
stage_begin "CUDA tests"
tests_rc=0
run_tests "$@" || tests_rc=$?
stage_end
[ "$tests_rc" -eq 0 ] || exit "$tests_rc"
note "passed in $SECONDS s"
