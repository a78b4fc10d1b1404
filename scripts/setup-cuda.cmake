# Included right after project() by scripts/setup-cuda.sh (-DCMAKE_PROJECT_INCLUDE=this file): what
# a build against a PyTorch wheel and the Debian packages unpacked into VESCALE_DEPS_PREFIX needs
# that the top-level CMakeLists.txt, written for installed Debian packages, does not say.
#
# Inputs (cache variables setup-cuda.sh passes):
#   VESCALE_DEPS_PREFIX        the unpacked packages' root (holds usr/include, usr/lib/<arch>)
#   VESCALE_EXTRA_INCLUDE_DIRS headers LibTorch's headers include but it does not ship (nccl.h)
#   VESCALE_EXTRA_LINK_LIBS    libraries those headers' inline code may call (libnccl.so.2)
#   VESCALE_RPATH_LINK_DIRS    where the linker finds the wheel libraries' own dependencies
if(NOT VESCALE_DEPS_PREFIX)
  message(FATAL_ERROR "[setup-cuda] VESCALE_DEPS_PREFIX is not set; run scripts/setup-cuda.sh")
endif()
set(_deps_usr "${VESCALE_DEPS_PREFIX}/usr")
set(_deps_lib "${_deps_usr}/lib/x86_64-linux-gnu")  # the packages are Debian amd64

# The prefix's headers first, before every other include folder. LibTorch 2.x ships its own fmt
# headers (a newer fmt) in the folder TORCH_INCLUDE_DIRS names, and that folder comes first on the
# compile line; Debian's spdlog and libfmt.so.9 need fmt 9's headers. A directory-level include
# folder precedes every target's own, in lib/, app/ and tests/ alike.
include_directories(BEFORE SYSTEM "${_deps_usr}/include" ${VESCALE_EXTRA_INCLUDE_DIRS})

# HDF5 from libhdf5.a (NOTE [Wheel-only deps] in scripts/fetch-cuda-deps.sh), searched for in the
# prefix only: Debian's hdf5/serial folder is a root of its own (include/ and lib/ inside), and with
# HDF5_ROOT set FindHDF5 looks nowhere else. No h5cc wrapper: it would name the system's HDF5, or
# Debian's curl and OpenSSL libraries.
set(HDF5_ROOT "${_deps_lib}/hdf5/serial")
set(HDF5_USE_STATIC_LIBRARIES ON)
set(HDF5_NO_FIND_PACKAGE_CONFIG_FILE ON)
set(HDF5_C_COMPILER_EXECUTABLE "" CACHE FILEPATH "none: setup-cuda.cmake searches by name" FORCE)
# What libhdf5.a needs (FindHDF5 names only the library when it searches by name). Standard
# libraries come last on every link line, after libhdf5.a.
string(APPEND CMAKE_CXX_STANDARD_LIBRARIES
  " ${_deps_lib}/libsz.a ${_deps_lib}/libaec.a ${_deps_lib}/libz.a -ldl -lm")
# zlib and zstd from their static archives in the prefix (NOTE [Wheel-only deps]).
set(ZLIB_INCLUDE_DIR "${_deps_usr}/include" CACHE PATH "the prefix's zlib" FORCE)
set(ZLIB_LIBRARY "${_deps_lib}/libz.a" CACHE FILEPATH "the prefix's zlib" FORCE)
set(ZSTD_INCLUDE_DIR "${_deps_usr}/include" CACHE PATH "the prefix's zstd" FORCE)
set(ZSTD_LIBRARY "${_deps_lib}/libzstd.a" CACHE FILEPATH "the prefix's zstd" FORCE)
foreach(lib IN LISTS VESCALE_EXTRA_LINK_LIBS)
  string(APPEND CMAKE_CXX_STANDARD_LIBRARIES " ${lib}")
endforeach()

# libtorch_cuda.so needs cuBLAS, cuDNN, NCCL... from the wheel's nvidia/ folders; ld must see them
# to check the link (at run time the wheel's own RPATH finds them).
foreach(dir IN LISTS VESCALE_RPATH_LINK_DIRS)
  string(APPEND CMAKE_EXE_LINKER_FLAGS " -Wl,-rpath-link,${dir}")
endforeach()
