// The peak FLOP/s an MFU is measured against (NOTE [MFU peak]).
#pragma once

#include <c10/core/ScalarType.h>

#include <functional>
#include <optional>
#include <string>

#include "core/device.h"
#include "core/gpu_facts.h"

namespace vescale {

/// What a GPU's matmuls run as, which its datasheet gives a peak for.
enum class MatmulKind { kHalf, kTf32, kFloat32 };

/// One GPU's dense peaks per matmul kind (the datasheets' "with sparsity" figures halved).
struct GpuPeaks {
  const char* pattern;  ///< a part of the name nvidia-smi gives: "H100 PCIe"
  int major, minor;     ///< its compute capability
  double half, tf32, float32;
  const char* source;  ///< where the figures come from
};

/// The peak of a matmul of `kind` on the GPU `gpu` from the device table, or nullopt when the
/// table does not know that GPU (its name, or a name with another compute capability).
std::optional<double> table_peak_flops(const GpuFacts& gpu, MatmulKind kind);

/// The peak a job computing `dtype` measures its MFU against, per rank, and where it came from.
struct PeakFlops {
  double flops = 0;
  std::string source;  ///< "NVIDIA H100 80GB HBM3, dense bf16/f16 (the device table)"
};

/// `measure(device, dtype)`: a matmul rate measured on the device (measured_matmul_flops).
using MeasureMatmul = std::function<double(Device, at::ScalarType)>;

/// The MFU peak of a job computing `dtype` on `device` (`tf32`: its float32 matmuls run as TF32):
/// on CUDA the device table's figure for the GPU `gpu`, else `measure` on that device in that
/// dtype; on the CPU a float32 matmul measured there, as ever.
PeakFlops device_peak_flops(Device device, const GpuFacts& gpu, at::ScalarType dtype, bool tf32,
                            const MeasureMatmul& measure);

/// Whether a CUDA job takes device_peak_flops: once a GPU has run it, or with
/// training.unverified_kernels = true (NOTE [GPU-verified]).
bool device_peaks_taken();

/// The job's MFU peak: metrics.peak_flops when it is set (> 0); else on CUDA, where
/// device_peaks_taken(), device_peak_flops for this process's GPU (measuring where the table has
/// none); else a float32 matmul measured on the host CPU.
PeakFlops job_peak_flops(double configured, Device device, at::ScalarType dtype);

}  // namespace vescale
