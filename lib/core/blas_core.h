// NOTE [BLAS kernels]: a DYNAMIC_ARCH OpenBLAS (Debian's) picks its kernels for the CPU it finds
// when it is loaded, before main, from a table of CPU models; a model newer than its table falls
// back to its most generic kernels. Debian 12's 0.3.21 does not know Intel's family 6 model 207
// (AVX-512, AMX) and runs Prescott's SSE3 kernels there: gpt-tiny trained at 1,137 tokens/s
// against 3,440 with SkylakeX's (issue [41]). So vescale-train compares the kernels OpenBLAS
// picked with the vectors the CPU has, and where it picked narrower ones, the commands that
// compute (train, eval, generate, comm) start again at once with OPENBLAS_CORETYPE set to the
// kernels for those vectors (execv, the same pid and arguments: before any thread, file or
// socket); the local launcher's workers inherit it. OpenBLAS reads OPENBLAS_CORETYPE only at
// load, hence the re-exec. A user's own OPENBLAS_CORETYPE is left alone, and
// VESCALE_BLAS_CORE=off keeps what OpenBLAS picked. The threads line names the kernels and why.
// Other kernels sum in another order: float64 curves agree to ~1e-15, not bit for bit
// (tests/e2e/test_blas_kernels.py).
#pragma once

#include <string>

namespace vescale::blas {

/// The widest vectors a CPU has, as OpenBLAS's kernels are cut.
enum class CpuVectors { kOther, kAvx, kAvx2, kAvx512 };

/// This CPU's (CPUID), and whether it is AMD's.
CpuVectors cpu_vectors();
bool cpu_is_amd();

/// What to do about OpenBLAS's kernels.
struct CoreChoice {
  std::string set;     ///< the OPENBLAS_CORETYPE to start again with, or "" (keep)
  std::string reason;  ///< for the threads line
};

/// The choice for OpenBLAS having picked `picked` ("Prescott"; "" if the BLAS is not a
/// DYNAMIC_ARCH OpenBLAS) on a CPU with `vectors`; `off` is VESCALE_BLAS_CORE, `coretype`
/// OPENBLAS_CORETYPE (either may be null), `chosen_for` what OpenBLAS picked before a re-exec
/// that set it (VESCALE_BLAS_CORE_CHOSEN, or null).
CoreChoice choose_core(const std::string& picked, CpuVectors vectors, bool amd, const char* off,
                       const char* coretype, const char* chosen_for);

/// The kernels the loaded OpenBLAS uses (openblas_get_corename), or "" when there is none.
std::string openblas_core();

/// For the commands that compute: starts this program again with OPENBLAS_CORETYPE set when
/// choose_core says so (does not return then; returns if execv fails). Call first in main.
void choose_kernels_or_restart(int argc, char** argv);

/// The threads line's words on the kernels: "kernels SkylakeX (OpenBLAS picked Prescott on this
/// AVX-512 CPU; VESCALE_BLAS_CORE=off keeps it)", or "" when there is nothing to say.
std::string kernels_text();

}  // namespace vescale::blas
