#include "core/blas_core.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <string>

namespace vescale::blas {
namespace {

constexpr const char* kChosenFor = "VESCALE_BLAS_CORE_CHOSEN";

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

/// The vectors an OpenBLAS kernel set is written for, by its name.
CpuVectors vectors_of(const std::string& core) {
  const std::string c = lower(core);
  for (const char* name : {"skylakex", "cooperlake", "sapphirerapids"})
    if (c == name) return CpuVectors::kAvx512;
  for (const char* name : {"haswell", "zen", "excavator"})
    if (c == name) return CpuVectors::kAvx2;
  for (const char* name : {"sandybridge", "bulldozer", "piledriver", "steamroller"})
    if (c == name) return CpuVectors::kAvx;
  return CpuVectors::kOther;
}

const char* vectors_name(CpuVectors v) {
  switch (v) {
    case CpuVectors::kAvx512:
      return "AVX-512";
    case CpuVectors::kAvx2:
      return "AVX2";
    case CpuVectors::kAvx:
      return "AVX";
    default:
      return "SSE";
  }
}

/// The kernels for `vectors` on this vendor's CPUs, or "" for none better than generic ones.
const char* core_for(CpuVectors vectors, bool amd) {
  switch (vectors) {
    case CpuVectors::kAvx512:
      return "SkylakeX";
    case CpuVectors::kAvx2:
      return amd ? "Zen" : "Haswell";
    case CpuVectors::kAvx:
      return "Sandybridge";
    default:
      return "";
  }
}

/// choose_core for this process: its OpenBLAS, its CPU and its environment.
CoreChoice this_process_choice() {
  return choose_core(openblas_core(), cpu_vectors(), cpu_is_amd(), std::getenv("VESCALE_BLAS_CORE"),
                     std::getenv("OPENBLAS_CORETYPE"), std::getenv(kChosenFor));
}

/// A command that computes with the BLAS (the others read and write files).
bool computes(int argc, char** argv) {
  if (argc < 2) return false;
  for (const char* command : {"train", "eval", "generate", "comm"})
    if (std::strcmp(argv[1], command) == 0) return true;
  return false;
}

}  // namespace

CpuVectors cpu_vectors() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    return CpuVectors::kAvx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return CpuVectors::kAvx2;
  if (__builtin_cpu_supports("avx")) return CpuVectors::kAvx;
#endif
  return CpuVectors::kOther;
}

bool cpu_is_amd() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return __builtin_cpu_is("amd") != 0;
#else
  return false;
#endif
}

CoreChoice choose_core(const std::string& picked, CpuVectors vectors, bool amd, const char* off,
                       const char* coretype, const char* chosen_for) {
  if (picked.empty()) return {};  // not a DYNAMIC_ARCH OpenBLAS: nothing to choose
  if (chosen_for != nullptr && *chosen_for != '\0') {
    return {"", fmt::format("kernels {} (OpenBLAS picked {} on this {} CPU; VESCALE_BLAS_CORE=off "
                            "keeps its own)",
                            picked, chosen_for, vectors_name(vectors))};
  }
  if (coretype != nullptr && *coretype != '\0')
    return {"", fmt::format("kernels {} (OPENBLAS_CORETYPE={})", picked, coretype)};
  const char* better = core_for(vectors, amd);
  if (*better == '\0' || vectors_of(picked) >= vectors) return {"", ""};
  if (off != nullptr && lower(off) == "off") {
    return {"", fmt::format("kernels {}, OpenBLAS's pick on this {} CPU, whose {} kernels run "
                            "faster (VESCALE_BLAS_CORE=off)",
                            picked, vectors_name(vectors), better)};
  }
  return {better, ""};
}

std::string openblas_core() {
  using GetCore = char* (*)();
  auto get = reinterpret_cast<GetCore>(::dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  const char* name = get != nullptr ? get() : nullptr;
  return name != nullptr ? name : "";
}

void choose_kernels_or_restart(int argc, char** argv) {
  if (!computes(argc, argv)) return;
  const CoreChoice choice = this_process_choice();
  if (choice.set.empty()) return;
  ::setenv(kChosenFor, openblas_core().c_str(), 1);
  ::setenv("OPENBLAS_CORETYPE", choice.set.c_str(), 1);
  ::execv("/proc/self/exe", argv);
  // execv failed: go on with OpenBLAS's own kernels, and say nothing of a choice.
  ::unsetenv(kChosenFor);
  ::unsetenv("OPENBLAS_CORETYPE");
}

std::string kernels_text() {
  return this_process_choice().reason;
}

}  // namespace vescale::blas
