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
  std::string source;     ///< "NVIDIA H100 80GB HBM3, dense bf16/f16 (the device table)"
  bool on_cores = false;  ///< measured on the CPU's cores: a lower bound (read_mfu raises it)
};

/// `measure(device, dtype)`: a matmul rate measured on the device (measured_matmul_flops).
using MeasureMatmul = std::function<double(Device, at::ScalarType)>;

/// The MFU peak of a job computing `dtype` on the GPU `device` (`tf32`: its float32 matmuls run
/// as TF32): the device table's figure for the GPU `gpu`, else `measure` on that device in that
/// dtype.
PeakFlops device_peak_flops(Device device, const GpuFacts& gpu, at::ScalarType dtype, bool tf32,
                            const MeasureMatmul& measure);

/// An MFU, and the peak it was read against.
struct MfuReading {
  double mfu = 0;
  double peak = 0;
  bool raised = false;  ///< the peak rose to the rate
};

/// NOTE [MFU peak]: a rank's model FLOP/s `rate` over `peak`. A `measured` peak (the CPU's cores)
/// is a lower bound of the true one, and so is a rate reached: past it, the peak rises to the rate
/// (an MFU of 1). A datasheet or configured peak is kept, whatever the rate.
MfuReading read_mfu(double rate, double peak, bool measured);

/// `core_flops(dtype)`: one core's best matmul rate in `dtype` (measured_core_flops).
using CoreFlops = std::function<double(at::ScalarType)>;

/// The best rate of one thread multiplying two n x n matrices in `dtype` on the CPU: the fastest
/// of the matmuls timed over about `seconds` (at least 3) after a warm-up one, with ATen and
/// OpenBLAS at one thread meanwhile (OneThread).
double measured_core_flops(at::ScalarType dtype, int64_t n = 1024, double seconds = 0.25);

/// The CPU's MFU peak of a rank computing `dtype`: one core's best matmul, `core_flops(dtype)`,
/// times the rank's share of the machine's cores, `core_share` (its cores over its local ranks).
PeakFlops cpu_peak_flops(at::ScalarType dtype, double core_share, const CoreFlops& core_flops);

/// Whether a CUDA job takes device_peak_flops: once a GPU has run it, or with
/// training.unverified_kernels = true (NOTE [GPU-verified]).
bool device_peaks_taken();

/// The job's MFU peak: metrics.peak_flops when it is set (> 0); on the CPU cpu_peak_flops with
/// this rank's rank_core_share() (`core_flops` is called on every rank or on none: the trainer's
/// measures on rank 0 alone and broadcasts); on CUDA, where device_peaks_taken(),
/// device_peak_flops for this process's GPU (measuring where the table has none); else a float32
/// matmul measured on the host CPU.
PeakFlops job_peak_flops(
    double configured, Device device, at::ScalarType dtype,
    const CoreFlops& core_flops = [](at::ScalarType dtype) { return measured_core_flops(dtype); });

}  // namespace vescale
