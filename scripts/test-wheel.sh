#!/usr/bin/env bash
# The wheel check: builds vescale-train exactly as a GPU machine with only a PyTorch wheel builds
# it, from the PyPI wheel our users run (PyTorch 2.11 with CUDA 13.0, in the pinned environment
# of scripts/python-env.sh) and this machine's CUDA 13.0 toolkit: scripts/setup-cuda.sh, C++20,
# CUDA kernels and NCCL on, VESCALE_WERROR=ON, no warning allowed. Then runs, on the CPU, the
# tests that differ between LibTorch versions and the real Python clients (NOTE [What the wheel
# check runs]). CI runs it after the Debian 12 suite.
#
#   scripts/test-wheel.sh                  # environment, packages, build, the wheel's tests
#   scripts/test-wheel.sh -R clients       # arguments go to ctest instead of the wheel's subset
#   scripts/test-wheel.sh --all            # every test of the suite against the wheel (reconfigures
#                                          # with every test file)
#   scripts/test-wheel.sh --set-up         # only the downloads: the environment and the packages
#                                          # (CI runs this beside the Debian 12 build)
#
# NOTE [What the wheel check runs]: the Debian 12 build already compiles and runs every test
# against LibTorch 1.13; what only this build shows is (1) that every file compiles without a
# warning as C++20 against the wheel's LibTorch 2.11 headers and with nvcc 13.0 for sm_80, sm_90
# and sm_100, the CUDA-only files (lib/comm/nccl_backend.cpp, lib/core/gpu_memory.cpp,
# lib/train/gpu_activity.cpp) and our CUDA kernels in place of their CPU stubs; (2) what those
# files and LibTorch 2.11 do at run time on a machine without a GPU; (3) what the real clients
# (transformers, tokenizers, sentencepiece, torch.optim) make of what we write and read. So it
# builds vescale-train, vescale-optimizer-steps and the test binary from the test files of the
# tests whose subject differs between LibTorch versions (unity build, as the Debian 12 build; no
# benchmarks), and runs: the backend choice and NCCL's refusals (Backends, Collectives,
# PointToPoint, FastPaths' build summary, JobConfig), the metrics' GPU memory (Metrics), the device
# and kernel tables, whose rows name LibTorch's fused kernels (Device, PeakFlops, KernelTable,
# LinearCrossEntropy, FusedLoss), every op rule against LibTorch 2.11's single-device op (OpRules),
# three runs of the real binary (the fused loss, a Llama, the profiler's trace:
# e2e.test_fused_loss, test_llama, test_flight_recorder), the benchmark's peers against the binary
# (e2e.test_peers: FSDP2 and DTensor TP on the environment's PyTorch), and the client tests
# (clients.*: NOTE [Client tests] in tests/CMakeLists.txt). A change to what those files do adds its test file to
# WHEEL_TEST_FILES.
#
# Environment:
#   BUILD_DIR  the build folder (default build-wheel)
#   JOBS       build and ctest jobs (default 2)
#   VESCALE_PYTHON_ENVS, BASE_PYTHON: scripts/python-env.sh's
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build-wheel}
JOBS=${JOBS:-2}
WHEEL_TEST_FILES="comm/group_test.cpp;kernels/fast_paths_test.cpp;config/job_config_test.cpp;\
train/metrics_test.cpp;core/device_test.cpp;train/peak_flops_test.cpp;kernels/kernel_table_test.cpp;\
dtensor/linear_cross_entropy_test.cpp;train/fused_loss_test.cpp;dtensor/ops_test.cpp;\
kernels/cuda_kernels_test.cpp"
WHEEL_TESTS='^[^e]|^e2e\.test_(fused_loss|llama|flight_recorder|peers)$'

note() { echo "[wheel] [${SECONDS}s] $*"; }
die() {
  echo "[wheel] error: $*" >&2
  exit 1
}

set_up_only=0
if [ "${1:-}" = --set-up ]; then
  set_up_only=1
  shift
fi

source scripts/lib/stage_clock.sh

# The downloads: the pinned environment (~3.5 GB the first time) and the Debian packages the
# wheel route unpacks (scripts/fetch-cuda-deps.sh, ~6 MB).
set_up() {
  PY=$(bash scripts/python-env.sh | tail -1)
  note "python: $PY"
  if [ -f third_party/debs/MANIFEST ] && [ third_party/debs/MANIFEST -nt scripts/fetch-cuda-deps.sh ]; then
    note "third_party/debs is there ($(wc -l <third_party/debs/MANIFEST) packages)"
  else
    local log
    log=$(mktemp /tmp/vescale-fetch.XXXXXX)
    if ! bash scripts/fetch-cuda-deps.sh >"$log" 2>&1; then
      # A new machine's apt may not have read its lists yet.
      note "fetching failed; apt-get update, then once more"
      { apt-get update -q && bash scripts/fetch-cuda-deps.sh; } >"$log" 2>&1 ||
        { tail -20 "$log" >&2; die "scripts/fetch-cuda-deps.sh failed"; }
    fi
    note "$(grep -m1 'packages,' "$log")"
    rm -f "$log"
  fi
}

build() {
  local test_files=$WHEEL_TEST_FILES
  [ $# -eq 0 ] || test_files=""  # other tests asked for (-R, --all): every test file
  note "configuring $BUILD_DIR through scripts/setup-cuda.sh (the wheel's LibTorch, C++20)"
  local log=$BUILD_DIR/test-wheel-configure.log
  mkdir -p "$BUILD_DIR"
  # -O2 as the Debian 12 build's RelWithDebInfo (the same optimiser warnings), without its debug
  # information, which nobody reads here and which costs compile time and disk.
  if ! PYTHON=$PY BUILD_DIR=$BUILD_DIR BUILD_TYPE=Release bash scripts/setup-cuda.sh \
    --configure-only -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" -DVESCALE_WERROR=ON \
    -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=16 -DVESCALE_BUILD_BENCH=OFF \
    -DVESCALE_TEST_FILES="$test_files" \
    -DVESCALE_CXX_STANDARD=20 -DVESCALE_CUDA_KERNELS=ON -DVESCALE_CLIENTS_PYTHON="$PY" \
    >"$log" 2>&1; then
    tail -30 "$log" >&2
    die "the wheel-route configure failed (log: $log)"
  fi
  grep -E '^-- vescale-train|^\[setup-cuda\]' "$log" | sed 's/^/[wheel] /'
  grep -q '^-- vescale-train: .*NCCL path ON, C++20, .*CUDA kernels ON' "$log" ||
    die "the configure step did not choose C++20 with NCCL and the CUDA kernels (log: $log)"
  note "building with $JOBS jobs (log: $BUILD_DIR/build.log)"
  local rc=0 warnings
  cmake --build "$BUILD_DIR" -j "$JOBS" --target vescale-train vescale_tests \
    vescale-optimizer-steps >"$BUILD_DIR/build.log" 2>&1 || rc=$?
  warnings=$(grep -c 'warning' "$BUILD_DIR/build.log" || true)
  if [ "$rc" -ne 0 ]; then
    grep -E 'error|warning' "$BUILD_DIR/build.log" | head -40 >&2
    die "the build failed ($warnings warnings; log: $BUILD_DIR/build.log)"
  fi
  note "built: $warnings warnings"
  [ "$warnings" -eq 0 ] || {
    grep 'warning' "$BUILD_DIR/build.log" | head -20 >&2
    die "the build has warnings"
  }
  "$BUILD_DIR/vescale-train" --version | sed 's/^/[wheel] /'
}

# Tests skip only with a reason: print each (ctest lists skipped C++ tests; the Python tests'
# unittest skips are in their output).
report_skips() {
  local log=$BUILD_DIR/Testing/Temporary/LastTest.log
  [ -f "$log" ] || return 0
  awk '/^\[ RUN      \]/ { test = $4 }
       /: Skipped$/ { getline reason; print "[wheel] skipped: " test ": " reason }
       / \.\.\. skipped / { sub(/^ +/, ""); print "[wheel] skipped: " $0 }' "$log"
}

run_tests() {
  if [ $# -eq 0 ]; then
    set -- -R "$WHEEL_TESTS"
    note "running the tests the wheel build shows (NOTE [What the wheel check runs])"
  elif [ "$1" = --all ]; then
    shift
  fi
  local rc=0
  (cd "$BUILD_DIR" && ctest -j "$JOBS" --output-on-failure --timeout 900 "$@") || rc=$?
  report_skips
  return "$rc"
}

stage_begin "wheel set-up"
set_up
stage_end
if [ $set_up_only = 1 ]; then
  note "the environment and packages are ready (--set-up: not building)"
  exit 0
fi
stage_begin "wheel build"
build "$@"
stage_end
stage_begin "wheel tests"
tests_rc=0
run_tests "$@" || tests_rc=$?
stage_end
[ "$tests_rc" -eq 0 ] || exit "$tests_rc"
note "passed in $SECONDS s"
