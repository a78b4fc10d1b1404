#!/usr/bin/env bash
# Builds vescale-train on a machine that has a CUDA PyTorch wheel (LibTorch headers and CMake
# config, NCCL) but no apt and no network. It unpacks the Debian packages that
# scripts/fetch-cuda-deps.sh downloaded elsewhere (carried here in third_party/debs/) into
# third_party/prefix/, configures against the wheel's LibTorch and builds into build-cuda/.
#
#   scripts/setup-cuda.sh                       # unpack, configure, build
#   scripts/setup-cuda.sh --configure-only      # unpack and configure
#   scripts/setup-cuda.sh -DVESCALE_WERROR=ON   # other arguments go to cmake's configure step
#
# Environment: PYTHON (the python3 that imports torch), TORCH_CMAKE_PREFIX (a folder holding
# Torch/TorchConfig.cmake: skips asking python, e.g. Debian's /usr/lib/x86_64-linux-gnu/cmake),
# TORCH_FOLDER (a wheel's torch/ folder unpacked, not installed: its include/, lib/, share/cmake/
# and version.py, as scripts/check-newest-torch.sh compiles against one), CUDA_HOME, NCCL_INCLUDE_DIR, DEBS_DIR, PREFIX, BUILD_DIR, BUILD_TYPE, JOBS.
#
# The packages are Debian 12's: built against glibc 2.36 and GCC 12's libstdc++. They run on a
# system as new or newer (which OS the GPU machines run is not recorded; their Python 3.12.3 is
# Ubuntu 24.04's: glibc 2.39, GCC 13) but not on an older one; check_abi stops with the versions
# when that is the case. fmt, spdlog and toml++ are shared libraries, so the C++ ABI must match
# too: the wheel must use the C++11 std::string ABI (every wheel since PyTorch 2.7 does);
# find_torch stops when it does not.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "[setup-cuda] $*" >&2; exit 1; }
note() { echo "[setup-cuda] $*"; }

configure_only=0
if [ "${1:-}" = --configure-only ]; then configure_only=1; shift; fi

DEBS_DIR=${DEBS_DIR:-third_party/debs}
PREFIX=$(realpath -m "${PREFIX:-third_party/prefix}")
BUILD_DIR=${BUILD_DIR:-build-cuda}
PYTHON=${PYTHON:-python3}
DEPS_LIB=$PREFIX/usr/lib/x86_64-linux-gnu

cmake_args=()

# Unpacks every package of $DEBS_DIR/MANIFEST into $PREFIX (again only when the list changed).
unpack_debs() {
  [ -f "$DEBS_DIR/MANIFEST" ] || die "no $DEBS_DIR/MANIFEST: run scripts/fetch-cuda-deps.sh where" \
    "apt works and bring its folder $DEBS_DIR here"
  if cmp -s "$DEBS_DIR/MANIFEST" "$PREFIX/MANIFEST"; then
    note "$PREFIX is up to date"
    return
  fi
  (cd "$DEBS_DIR" && sha256sum --quiet -c SHA256SUMS) || die "$DEBS_DIR is damaged; fetch it again"
  rm -rf "$PREFIX"
  mkdir -p "$PREFIX"
  local deb
  while read -r _ _ deb; do
    unpack_deb "$DEBS_DIR/$deb"
  done <"$DEBS_DIR/MANIFEST"
  # Links to Debian's own /lib (libz.so) or into packages not fetched (libhdf5.so, libsz.so): a
  # search that found them would leave the prefix.
  local link
  while IFS= read -r link; do
    if [[ $(readlink "$link") == /* ]] || [ ! -e "$link" ]; then rm "$link"; fi
  done < <(find "$PREFIX" -type l)
  cp "$DEBS_DIR/MANIFEST" "$PREFIX/MANIFEST"
  note "unpacked $(wc -l <"$DEBS_DIR/MANIFEST") packages into $PREFIX"
}

unpack_deb() {
  if command -v dpkg-deb >/dev/null; then
    dpkg-deb -x "$1" "$PREFIX"
    return
  fi
  # No dpkg: a .deb is an ar archive holding data.tar.{xz,zst,gz}.
  local data
  data=$(ar t "$1" | grep '^data\.tar') || die "$1 has no data.tar"
  case $data in
    *.xz) ar p "$1" "$data" | tar -xJ -C "$PREFIX" ;;
    *.zst) ar p "$1" "$data" | tar --zstd -x -C "$PREFIX" ;;
    *.gz) ar p "$1" "$data" | tar -xz -C "$PREFIX" ;;
    *) die "$1: cannot unpack $data" ;;
  esac
}

# Stops when this system's glibc or libstdc++ is older than what the prefix's libraries need.
check_abi() {
  if ! command -v objdump >/dev/null; then
    note "no objdump: not checking glibc and libstdc++ versions"
    return
  fi
  local libs symbols need_glibc need_cxx have_glibc have_cxx libstdcxx
  mapfile -t libs < <(find "$DEPS_LIB" -maxdepth 1 -type f -name '*.so.*')
  symbols=$(objdump -T "${libs[@]}")
  need_glibc=$(grep -o 'GLIBC_2\.[0-9.]*' <<<"$symbols" | sort -uV | tail -1 || true)
  need_cxx=$(grep -o 'GLIBCXX_3\.4\.[0-9]*' <<<"$symbols" | sort -uV | tail -1 || true)
  have_glibc=GLIBC_$(getconf GNU_LIBC_VERSION | cut -d' ' -f2)
  libstdcxx=$(${CXX:-c++} -print-file-name=libstdc++.so.6)
  [ -f "$libstdcxx" ] || die "no C++ compiler with a libstdc++ (${CXX:-c++}); set CXX"
  have_cxx=$(grep -ao 'GLIBCXX_3\.4\.[0-9]*' "$libstdcxx" | sort -uV | tail -1 || true)
  at_least "$have_glibc" "$need_glibc" ||
    die "Debian 12's libraries need $need_glibc; this system has $have_glibc"
  at_least "$have_cxx" "$need_cxx" ||
    die "Debian 12's libraries need $need_cxx; $libstdcxx has $have_cxx"
  note "ABI: the prefix needs $need_glibc and $need_cxx; this system has $have_glibc and $have_cxx"
}

at_least() { [ "$(printf '%s\n' "$1" "$2" | sort -V | tail -1)" = "$1" ]; }

# Sets torch_prefix; for a wheel also torch_lib, site_dir and torch_cuda (its CUDA version, None
# for a CPU wheel; None too for TORCH_CMAKE_PREFIX, which only the configure step tells apart).
torch_lib="" site_dir="" torch_cuda=None torch_root=""
find_torch() {
  if [ -n "${TORCH_FOLDER:-}" ]; then
    local version
    [ -f "$TORCH_FOLDER/share/cmake/Torch/TorchConfig.cmake" ] && [ -f "$TORCH_FOLDER/version.py" ] ||
      die "TORCH_FOLDER=$TORCH_FOLDER is no torch/ folder of a wheel (share/cmake/Torch, version.py)"
    version=$(sed -n "s/^__version__ = '\(.*\)'/\1/p" "$TORCH_FOLDER/version.py")
    torch_cuda=$(sed -n "s/^cuda: .* = '\(.*\)'/\1/p" "$TORCH_FOLDER/version.py")
    torch_cuda=${torch_cuda:-None}
    # Every wheel since PyTorch 2.7 uses the C++11 std::string ABI (find_torch's check below).
    at_least "${version%%+*}" 2.7 || die "TORCH_FOLDER holds torch $version: 2.7 or later"
    torch_prefix=$TORCH_FOLDER/share/cmake torch_root=$TORCH_FOLDER torch_lib=$TORCH_FOLDER/lib
    note "LibTorch: torch $version (CUDA $torch_cuda) unpacked in $TORCH_FOLDER (TORCH_FOLDER)"
    return
  fi
  if [ -n "${TORCH_CMAKE_PREFIX:-}" ]; then
    torch_prefix=$TORCH_CMAKE_PREFIX
    note "LibTorch: $torch_prefix (TORCH_CMAKE_PREFIX)"
    return
  fi
  local info abi torch_dir
  info=$("$PYTHON" -c 'import os, torch
print(torch.utils.cmake_prefix_path, os.path.dirname(torch.__file__), torch.version.cuda,
      int(torch.compiled_with_cxx11_abi()), torch.__version__)') ||
    die "$PYTHON cannot import torch; set PYTHON, or TORCH_CMAKE_PREFIX to LibTorch's CMake folder"
  read -r torch_prefix torch_dir torch_cuda abi version <<<"$info"
  # Debian's fmt, spdlog and toml++ pass std::string across their ABI.
  [ "$abi" = 1 ] || die "torch $version uses the pre-C++11 std::string ABI; Debian's libraries" \
    "need the C++11 one (wheels since PyTorch 2.7)"
  torch_lib=$torch_dir/lib
  # TorchConfig.cmake looks for libtorch.so and libc10.so with the wheel's lib/ as a last resort,
  # after the system's folders: where Debian's libtorch-dev is installed too (CI's machine), it
  # would link Debian's 1.13 under the wheel's headers. The wheel's folder is searched first.
  torch_root=$torch_dir
  site_dir=$(dirname "$torch_dir")
  note "LibTorch: torch $version (CUDA $torch_cuda) from $torch_prefix"
}

# The CUDA toolkit, NVTX and NCCL that the wheel's CMake config and headers need.
find_cuda() {
  local nvcc cuda_root release dir
  nvcc=$(command -v nvcc || true)
  for dir in "${CUDA_HOME:-}" /usr/local/cuda; do
    [ -z "$nvcc" ] && [ -n "$dir" ] && [ -x "$dir/bin/nvcc" ] && nvcc=$dir/bin/nvcc
  done
  if [ -z "$nvcc" ]; then
    [ "$torch_cuda" = None ] ||
      die "torch is built for CUDA $torch_cuda; its CMake config needs nvcc: set CUDA_HOME"
    return
  fi
  cuda_root=$(dirname "$(dirname "$(readlink -f "$nvcc")")")
  export CUDACXX=$cuda_root/bin/nvcc PATH=$cuda_root/bin:$PATH
  cmake_args+=(-DCUDA_TOOLKIT_ROOT_DIR="$cuda_root" -DCUDAToolkit_ROOT="$cuda_root")
  release=$("$CUDACXX" --version | grep -o 'release [0-9.]*' | cut -d' ' -f2 || true)
  note "CUDA: $cuda_root ($release)"
  if [ "$torch_cuda" != None ] && [ "${release%%.*}" != "${torch_cuda%%.*}" ]; then
    note "warning: torch is built for CUDA $torch_cuda but nvcc is $release"
  fi

  # The wheel's nvidia/ folders (nvidia-nccl, nvidia-nvtx, cuBLAS...): their include/ and lib/.
  local wheel_inc=() wheel_lib=()
  if [ -n "$site_dir" ] && [ -d "$site_dir/nvidia" ]; then
    mapfile -t wheel_inc < <(find "$site_dir/nvidia" -maxdepth 3 -type d -name include | sort)
    mapfile -t wheel_lib < <(find "$site_dir/nvidia" -maxdepth 3 -type d -name lib | sort)
  fi

  # LibTorch's Caffe2 config looks for NVTX3 headers only inside a PyTorch source tree and
  # otherwise links libnvToolsExt, which CUDA 12.9 and later no longer ship: name the toolkit's.
  local nvtx_dir=""
  for dir in "$cuda_root/include" "$cuda_root/targets/x86_64-linux/include" "${wheel_inc[@]}"; do
    [ -z "$nvtx_dir" ] && [ -d "$dir/nvtx3" ] && nvtx_dir=$dir
  done
  if [ -n "$nvtx_dir" ]; then
    cmake_args+=(-Dnvtx3_dir="$nvtx_dir")
  else
    note "no nvtx3 headers found: LibTorch's config will ask for libnvToolsExt"
  fi

  # ProcessGroupNCCL.hpp includes nccl.h, which LibTorch does not ship. Prefer the wheel's own:
  # ProcessGroupNCCL's options hold NCCL structs, so the header must match the library that
  # libtorch_cuda.so loads. Its libnccl.so.2 is linked too, for any inline call in those headers.
  local nccl_inc="" nccl_lib=""
  for dir in ${NCCL_INCLUDE_DIR:+"$NCCL_INCLUDE_DIR"} "${wheel_inc[@]}" "$cuda_root/include" \
    /usr/include; do
    [ -z "$nccl_inc" ] && [ -f "$dir/nccl.h" ] && nccl_inc=$dir
  done
  if [ -z "$nccl_inc" ]; then
    [ "$torch_cuda" = None ] ||
      die "no nccl.h in the wheel's nvidia/ folders, CUDA or /usr/include: set NCCL_INCLUDE_DIR"
    return
  fi
  case $nccl_inc in
    /usr/include | "$cuda_root/include") ;;  # on the compile line already
    *) cmake_args+=(-DVESCALE_EXTRA_INCLUDE_DIRS="$nccl_inc") ;;
  esac
  if [ "$torch_cuda" != None ]; then
    nccl_lib=$(find "$nccl_inc/../lib" -maxdepth 1 -name 'libnccl.so*' 2>/dev/null | sort |
      head -1 || true)
    [ -n "$nccl_lib" ] && nccl_lib=$(realpath "$nccl_lib") &&
      cmake_args+=(-DVESCALE_EXTRA_LINK_LIBS="$nccl_lib")
  fi
  note "NCCL: $nccl_inc${nccl_lib:+, $nccl_lib}"

  # libtorch_cuda.so's own dependencies (cuBLAS, cuDNN, NCCL...) live in the wheel's nvidia/
  # folders; ld must find them to check the link.
  local rpath_link=(${torch_lib:+"$torch_lib"} "${wheel_lib[@]}")
  cmake_args+=(-DVESCALE_RPATH_LINK_DIRS="$(IFS=';'; echo "${rpath_link[*]}")")
}

# NOTE [Gloo headers] in fetch-cuda-deps.sh: the headers from the prefix, the library from
# LibTorch (which links Gloo in); the package's CMake config names a libgloo.so it does not ship.
gloo_headers() {
  [ -f "$PREFIX/usr/include/gloo/rendezvous/store.h" ] ||
    die "no Gloo headers in $PREFIX (c10d's ProcessGroupGloo.hpp needs them): run" \
      "scripts/fetch-cuda-deps.sh again, it fetches them now"
  cmake_args+=(-DCMAKE_DISABLE_FIND_PACKAGE_Gloo=TRUE)
}

configure() {
  local generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  [ -f "$BUILD_DIR/CMakeCache.txt" ] && generator=()  # keep the generator it was made with
  mkdir -p "$BUILD_DIR"
  # The prefix first: a LibTorch CMake folder may hold other packages' configs too (Debian's
  # /usr/lib/x86_64-linux-gnu/cmake holds fmt's), and the first folder that has one wins.
  cmake -S . -B "$BUILD_DIR" "${generator[@]}" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" \
    -DCMAKE_PREFIX_PATH="$PREFIX/usr;${torch_root:+$torch_root;}$torch_prefix" \
    -DCMAKE_PROJECT_INCLUDE="$PWD/scripts/setup-cuda.cmake" -DVESCALE_DEPS_PREFIX="$PREFIX" \
    "${cmake_args[@]}" "$@" 2>&1 | tee "$BUILD_DIR/configure.log"
  if [ "$torch_cuda" != None ] && grep -q 'NCCL path OFF' "$BUILD_DIR/configure.log"; then
    die "torch is built for CUDA $torch_cuda but CMake chose the no-NCCL stub:" \
      "see $BUILD_DIR/configure.log"
  fi
}

# Prints where each dependency was found; stops if one came from outside the prefix.
report_found() {
  local name value outside=0
  for name in Torch_DIR CLI11_DIR tomlplusplus_DIR spdlog_DIR fmt_DIR nlohmann_json_DIR GTest_DIR \
    HDF5_C_INCLUDE_DIR HDF5_hdf5_LIBRARY_RELEASE SENTENCEPIECE_LIBRARY ZLIB_LIBRARY ZSTD_LIBRARY; do
    value=$(sed -n "s/^$name:[A-Z]*=//p" "$BUILD_DIR/CMakeCache.txt")
    [ -n "$value" ] || continue  # GTest_DIR only with tests
    printf '[setup-cuda]   %-26s %s\n' "$name" "$value"
    if [ "$name" != Torch_DIR ] && [[ $value != "$PREFIX"/* ]]; then outside=1; fi
  done
  [ $outside = 0 ] || die "a dependency above came from outside $PREFIX"
  [ -n "$torch_root" ] || return 0
  for name in TORCH_LIBRARY c10_LIBRARY; do
    value=$(sed -n "s/^$name:[A-Z]*=//p" "$BUILD_DIR/CMakeCache.txt")
    printf '[setup-cuda]   %-26s %s\n' "$name" "$value"
    [[ $value == "$torch_root"/* ]] || die "$name is not the wheel's ($torch_root): delete" \
      "$BUILD_DIR/CMakeCache.txt and configure again"
  done
}

write_env() {
  local path=$DEPS_LIB
  [ -n "$torch_lib" ] && path=$path:$torch_lib
  cat >"$BUILD_DIR/env.sh" <<EOF
# Written by scripts/setup-cuda.sh. The binaries in $BUILD_DIR find the prefix's fmt, spdlog and
# toml++ and LibTorch through their RUNPATH; source this where that is not enough (a binary copied
# elsewhere, a tool that loads the libraries itself).
export LD_LIBRARY_PATH="$path\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
EOF
}

unpack_debs
check_abi
gloo_headers
find_torch
find_cuda
configure "$@"
report_found
write_env
if [ $configure_only = 1 ]; then
  note "configured $BUILD_DIR (--configure-only: not building)"
  exit 0
fi
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}"
note "built $BUILD_DIR/vescale-train; tests: (cd $BUILD_DIR && ctest)"
