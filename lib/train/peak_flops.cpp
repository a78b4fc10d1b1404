#include "train/peak_flops.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <limits>

#include "core/dtype_names.h"
#include "core/thread_budget.h"
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
// on that device in that dtype, and metrics.peak_flops overrides both. It was once measured on
// the host CPU for every device: an H100 reported "mfu 196378%" (issue [31]).
// On the CPU the peak is what its cores reach: one core's best matmul in the job's dtype (1024 x
// 1024 on one thread, the fastest of ~0.25 s of them, on the BLAS kernels NOTE [BLAS kernels]
// chose) times the rank's share of the machine's cores (its cores over its local ranks: 0.5 where
// 4 ranks share 2 cores), whatever threads the rank runs. Rank 0 measures while the others wait
// in a broadcast, so ranks that share cores do not slow its clock. Before issue [41] each rank
// timed a 512 x 512 float32 matmul on its own threads, all at once: 4 ranks on 2 cores each
// measured a quarter of the machine and the MFU counted it 4 times, and on OpenBLAS's Prescott
// kernels the figure was that slow kernel's (the demo said "mfu 52%", now 16%). On the 2-core
// Xeon (family 6 model 207 at 2.1 GHz) one core's best float32 matmul is ~134 GFLOP/s: the vector
// units' bound, 16 lanes x 2 (FMA) x 2 FMA units x 2.1 GHz = 134.4 (docs/metrics.md).
// A busy machine still lowers it: with 3 other processes spinning on the 2 cores, the measure gave
// 60 GFLOP/s, and a run whose load went away after it read "mfu 89%" against a true ~40%. A peak
// measured on the cores is a lower bound of theirs, and so is any rate a run reaches: when a
// metrics line's MFU passes 100%, the trainer raises the peak to the rate reached and says so
// once (lib/train/trainer.cpp), so that a CPU run's MFU never reads above 100%.
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

double measured_core_flops(at::ScalarType dtype, int64_t n, double seconds) {
  const OneThread one;
  const auto options = at::TensorOptions().dtype(dtype);
  const at::Tensor a = at::randn({n, n}, options), b = at::randn({n, n}, options);
  at::matmul(a, b);  // warm up: the BLAS's buffers, the pages of the result
  double best = std::numeric_limits<double>::infinity(), spent = 0;
  for (int i = 0; i < 3 || (spent < seconds && i < 1000); ++i) {
    const auto start = std::chrono::steady_clock::now();
    at::matmul(a, b);
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::min(best, took);
    spent += took;
  }
  return 2.0 * static_cast<double>(n * n * n) / best;
}

MfuReading read_mfu(double rate, double peak, bool measured) {
  const double mfu = rate / peak;
  if (measured && mfu > 1) return {1.0, rate, true};
  return {mfu, peak, false};
}

PeakFlops cpu_peak_flops(at::ScalarType dtype, double core_share, const CoreFlops& core_flops) {
  const double core = core_flops(dtype);
  return {
      core * core_share,
      fmt::format("{:.4g} GFLOP/s a core (its best one-thread {} matmul) x {:.3g} core{} a "
                  "rank (the machine's cores over its local ranks)",
                  core / 1e9, dtype_names().name(dtype), core_share, core_share == 1 ? "" : "s"),
      /*on_cores=*/true};
}

PeakFlops job_peak_flops(double configured, Device device, at::ScalarType dtype,
                         const CoreFlops& core_flops) {
  if (configured > 0) return {configured, "metrics.peak_flops"};
  if (!device.is_cuda()) return cpu_peak_flops(dtype, rank_core_share(), core_flops);
  if (!device_peaks_taken()) {
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
        return measured_matmul_flops(4096, 0.2, on, type);  // a size that fills a GPU
      });
}

}  // namespace vescale
