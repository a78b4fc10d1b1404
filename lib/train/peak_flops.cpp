#include "train/peak_flops.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <array>

#include "kernels/kernel_table.h"
#include "train/metrics.h"

namespace vescale {
namespace {

// NOTE [MFU peak]
// MFU is model FLOPs (6 N + 12 L C T a token) per second over the peak of the device. On a GPU
// the peak is the datasheet's dense figure for the matmuls the job runs: bf16/float16 tensor
// cores, TF32 (float32 with TF32 matmuls, the kernel table's TF32 row), or plain float32. The
// table below knows a GPU by a part of its name and its compute capability (both from the
// driver: NOTE [GPU facts from the driver]); a GPU it does not know gets a short measured matmul
// on that device in that dtype, and metrics.peak_flops overrides both. The CPU keeps a measured
// float32 matmul. It was once measured on the host CPU for every device: an H100 reported
// "mfu 196378%" (issue [31]).
// The device table, the driver's facts and the measurement on a GPU are CUDA-only code, and no
// GPU has run them yet: as a kernel table row (NOTE [GPU-verified]) they are taken only once
// kDevicePeakRun records a gpu-check run (its MFU row) or with training.unverified_kernels =
// true. Until then a CUDA job without metrics.peak_flops keeps the old figure, a float32 matmul
// on the host CPU, and its [mfu] line says that this is not the GPU's peak.
// Order: the more specific name first ("H100 PCIe" before "H100").
constexpr std::array<GpuPeaks, 8> kGpuPeaks{{
    // NVIDIA H100 Tensor Core GPU datasheet, PCIe column: bf16 1,513 TFLOP/s and TF32 756 with
    // sparsity, float32 51.
    {"H100 PCIe", 9, 0, 756.5e12, 378e12, 51.2e12, "NVIDIA H100 datasheet (PCIe)"},
    // The same datasheet, H100 NVL column: 1,671 and 835 with sparsity, float32 60.
    {"H100 NVL", 9, 0, 835.5e12, 417.5e12, 60e12, "NVIDIA H100 datasheet (NVL)"},
    // The same datasheet, SXM column ("NVIDIA H100 80GB HBM3"): 1,979 and 989 with sparsity,
    // float32 67.
    {"H100", 9, 0, 989.4e12, 494.7e12, 66.9e12, "NVIDIA H100 datasheet (SXM)"},
    // NVIDIA H200 datasheet, H200 NVL column: 1,671 and 835 with sparsity, float32 60.
    {"H200 NVL", 9, 0, 835.5e12, 417.5e12, 60e12, "NVIDIA H200 datasheet (NVL)"},
    // The same datasheet, SXM column ("NVIDIA H200"): the H100 SXM's figures.
    {"H200", 9, 0, 989.4e12, 494.7e12, 66.9e12, "NVIDIA H200 datasheet (SXM)"},
    // NVIDIA A100 Tensor Core GPU datasheet, SXM and PCIe alike: bf16 312 (624 with sparsity),
    // TF32 156, float32 19.5.
    {"A100", 8, 0, 312e12, 156e12, 19.5e12, "NVIDIA A100 datasheet"},
    // NVIDIA L40S datasheet: bf16 733 and TF32 366 with sparsity, float32 91.6.
    {"L40S", 8, 9, 366.5e12, 183e12, 91.6e12, "NVIDIA L40S datasheet"},
    // NVIDIA Ada Lovelace architecture whitepaper, GeForce RTX 4090: bf16 with float32
    // accumulation 165.2 dense, TF32 82.6, float32 82.6.
    {"RTX 4090", 8, 9, 165.2e12, 82.6e12, 82.6e12, "NVIDIA Ada Lovelace whitepaper (RTX 4090)"},
}};

const GpuPeaks* find_gpu(const GpuFacts& gpu) {
  for (const GpuPeaks& row : kGpuPeaks) {
    if (gpu.name.find(row.pattern) == std::string::npos) continue;
    // A name the table knows on another chip (a future "H100 ..." of capability 10) is not it.
    if (gpu.major != 0 && (gpu.major != row.major || gpu.minor != row.minor)) return nullptr;
    return &row;
  }
  return nullptr;
}

const char* kind_name(MatmulKind kind) {
  switch (kind) {
    case MatmulKind::kHalf:
      return "bf16/float16";
    case MatmulKind::kTf32:
      return "TF32";
    case MatmulKind::kFloat32:
      break;
  }
  return "float32";
}

/// The matmul kind of a job computing `dtype`, or nullopt where the table has no column (float64).
std::optional<MatmulKind> matmul_kind(at::ScalarType dtype, bool tf32) {
  if (kernels::is_half_or_bf16(dtype)) return MatmulKind::kHalf;
  if (dtype == at::kFloat) return tf32 ? MatmulKind::kTf32 : MatmulKind::kFloat32;
  return std::nullopt;
}

double peak_of(const GpuPeaks& row, MatmulKind kind) {
  switch (kind) {
    case MatmulKind::kHalf:
      return row.half;
    case MatmulKind::kTf32:
      return row.tf32;
    case MatmulKind::kFloat32:
      break;
  }
  return row.float32;
}

/// The last gpu-check run whose MFU row held the device table's peak (NOTE [GPU-verified]).
constexpr kernels::GpuRun kDevicePeakRun = kernels::kNotYetRun;

}  // namespace

bool device_peaks_taken() {
  return kDevicePeakRun.date != nullptr || kernels::unverified_kernels();
}

std::optional<double> table_peak_flops(const GpuFacts& gpu, MatmulKind kind) {
  const GpuPeaks* row = find_gpu(gpu);
  if (row == nullptr) return std::nullopt;
  return peak_of(*row, kind);
}

PeakFlops device_peak_flops(Device device, const GpuFacts& gpu, at::ScalarType dtype, bool tf32,
                            const MeasureMatmul& measure) {
  if (!device.is_cuda()) {
    return {measure(kCpu, at::kFloat), "a float32 matmul measured on the CPU"};
  }
  const std::string name = gpu.name.empty() ? device.str() : gpu.name;
  const std::optional<MatmulKind> kind = matmul_kind(dtype, tf32);
  if (const GpuPeaks* row = find_gpu(gpu); row != nullptr && kind) {
    return {peak_of(*row, *kind),
            fmt::format("{}, dense {} ({})", name, kind_name(*kind), row->source)};
  }
  return {measure(device, dtype),
          fmt::format("a {} matmul measured on {} (not in the device table)", c10::toString(dtype),
                      name)};
}

PeakFlops job_peak_flops(double configured, Device device, at::ScalarType dtype) {
  if (configured > 0) return {configured, "metrics.peak_flops"};
  if (device.is_cuda() && !device_peaks_taken()) {
    return {measured_peak_flops(),
            fmt::format("a float32 matmul measured on the host CPU, not {}'s peak: the device "
                        "table is {} (set metrics.peak_flops, or training.unverified_kernels = "
                        "true)",
                        device.str(), kernels::gpu_run_text(kDevicePeakRun))};
  }
  // Float32 runs as TF32 where the kernel table sets TF32 matmuls (configure_matmul_precision).
  // A named context: GCC 14 takes a reference bound from a temporary argument for dangling.
  const kernels::KernelContext context{device, dtype};
  const bool tf32 = kernels::choose(kernels::kMatmulPrecisionPaths, context).id ==
                    kernels::MatmulPrecisionId::kTf32;
  return device_peak_flops(
      device, gpu_facts(device), dtype, tf32, [](Device on, at::ScalarType type) {
        // The CPU's figure as ever; a GPU's at a size that fills it.
        return on.is_cuda() ? measured_matmul_flops(4096, 0.2, on, type) : measured_peak_flops();
      });
}

}  // namespace vescale
