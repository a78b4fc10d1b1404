// NOTE [MFU peak]: the device table by GPU name and compute capability, the measured fallback
// for a GPU it does not know, and the CPU's peak: a core's best matmul times the rank's cores.
#include "train/peak_flops.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <utility>
#include <vector>

#include "core/thread_budget.h"
#include "kernels/kernel_table.h"
#include "support/tensors.h"
#include "train/metrics.h"

namespace vescale {
namespace {

using testing::kGpu;

/// A measurement that says what it was asked.
struct FakeMeasure {
  std::vector<std::pair<Device, at::ScalarType>> asked;
  double rate = 1.25e13;
  MeasureMatmul fn() {
    return [this](Device device, at::ScalarType dtype) {
      asked.emplace_back(device, dtype);
      return rate;
    };
  }
};

TEST(PeakFlops, AnH100ComesFromTheDeviceTable) {
  const GpuFacts h100{"NVIDIA H100 80GB HBM3", 9, 0};
  FakeMeasure measure;
  const PeakFlops bf16 = device_peak_flops(kGpu, h100, at::kBFloat16, false, measure.fn());
  EXPECT_DOUBLE_EQ(bf16.flops, 989.4e12);
  EXPECT_NE(bf16.source.find("NVIDIA H100 80GB HBM3, dense bf16/float16"), std::string::npos)
      << bf16.source;
  EXPECT_DOUBLE_EQ(device_peak_flops(kGpu, h100, at::kFloat, true, measure.fn()).flops, 494.7e12);
  EXPECT_DOUBLE_EQ(device_peak_flops(kGpu, h100, at::kFloat, false, measure.fn()).flops, 66.9e12);
  EXPECT_TRUE(measure.asked.empty());  // the table knew it: nothing measured
  // The PCIe card is another row, found before the SXM one.
  EXPECT_DOUBLE_EQ(*table_peak_flops({"NVIDIA H100 PCIe", 9, 0}, MatmulKind::kHalf), 756.5e12);
  EXPECT_DOUBLE_EQ(*table_peak_flops({"NVIDIA H200", 9, 0}, MatmulKind::kHalf), 989.4e12);
  EXPECT_DOUBLE_EQ(*table_peak_flops({"NVIDIA A100-SXM4-80GB", 8, 0}, MatmulKind::kTf32), 156e12);
  EXPECT_DOUBLE_EQ(*table_peak_flops({"NVIDIA L40S", 8, 9}, MatmulKind::kFloat32), 91.6e12);
  EXPECT_DOUBLE_EQ(*table_peak_flops({"NVIDIA GeForce RTX 4090", 8, 9}, MatmulKind::kHalf),
                   165.2e12);
  // A capability the driver could not read does not stop a name it knows.
  EXPECT_DOUBLE_EQ(*table_peak_flops({"NVIDIA H100 80GB HBM3", 0, 0}, MatmulKind::kHalf), 989.4e12);
}

TEST(PeakFlops, AGpuTheTableDoesNotKnowIsMeasuredOnItInItsDtype) {
  FakeMeasure measure;
  const PeakFlops unknown =
      device_peak_flops(kGpu, {"Some Future GPU", 12, 0}, at::kBFloat16, false, measure.fn());
  EXPECT_DOUBLE_EQ(unknown.flops, measure.rate);
  ASSERT_EQ(measure.asked.size(), 1u);
  EXPECT_EQ(measure.asked[0].first, kGpu);
  EXPECT_EQ(measure.asked[0].second, at::kBFloat16);
  EXPECT_NE(unknown.source.find("measured on Some Future GPU"), std::string::npos)
      << unknown.source;
  // A known name on another chip, an unnamed GPU, and float64 (no column) are measured too.
  EXPECT_FALSE(table_peak_flops({"NVIDIA H100 80GB HBM3", 10, 0}, MatmulKind::kHalf));
  device_peak_flops(kGpu, {}, at::kFloat, false, measure.fn());
  device_peak_flops(kGpu, {"NVIDIA H100 80GB HBM3", 9, 0}, at::kDouble, false, measure.fn());
  EXPECT_EQ(measure.asked.size(), 3u);
}

TEST(PeakFlops, TheCpusPeakIsACoresBestMatmulInTheJobsDtypeTimesTheRanksCores) {
  std::vector<at::ScalarType> asked;
  const CoreFlops core = [&asked](at::ScalarType dtype) {
    asked.push_back(dtype);
    return 1.344e11;
  };
  // 4 ranks on 2 cores: half a core each, not a core each counted 4 times (issue [41]).
  const PeakFlops crowded = cpu_peak_flops(at::kBFloat16, 0.5, core);
  EXPECT_DOUBLE_EQ(crowded.flops, 0.672e11);
  EXPECT_EQ(crowded.source,
            "134.4 GFLOP/s a core (its best one-thread bfloat16 matmul) x 0.5 cores a rank (the "
            "machine's cores over its local ranks)");
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0], at::kBFloat16);  // the job's dtype, not float32 whatever it computes
  // job_peak_flops takes this process's share of the cores.
  const PeakFlops job = job_peak_flops(0, kCpu, at::kDouble, core);
  EXPECT_DOUBLE_EQ(job.flops, 1.344e11 * rank_core_share());
  EXPECT_EQ(asked.back(), at::kDouble);
  // metrics.peak_flops overrides everything and measures nothing; the driver knows nothing of
  // the CPU.
  EXPECT_DOUBLE_EQ(job_peak_flops(3e12, kCpu, at::kFloat, core).flops, 3e12);
  EXPECT_EQ(job_peak_flops(3e12, kCpu, at::kFloat, core).source, "metrics.peak_flops");
  // Only the cores' measure is a lower bound that read_mfu may raise.
  EXPECT_TRUE(crowded.on_cores);
  EXPECT_FALSE(job_peak_flops(3e12, kCpu, at::kFloat, core).on_cores);
  EXPECT_EQ(asked.size(), 2u);
  EXPECT_TRUE(gpu_facts(kCpu).name.empty());
}

TEST(PeakFlops, AMeasuredPeakRisesToARateThatPassesItAndOthersStay) {
  // Measured while other processes spun on the cores: 60.4 GFLOP/s, and the run then reached 75.
  const MfuReading busy = read_mfu(75e9, 60.4e9, /*measured=*/true);
  EXPECT_TRUE(busy.raised);
  EXPECT_DOUBLE_EQ(busy.mfu, 1.0);
  EXPECT_DOUBLE_EQ(busy.peak, 75e9);
  // Below the peak nothing changes.
  const MfuReading quiet = read_mfu(30e9, 60e9, true);
  EXPECT_FALSE(quiet.raised);
  EXPECT_DOUBLE_EQ(quiet.mfu, 0.5);
  EXPECT_DOUBLE_EQ(quiet.peak, 60e9);
  // A datasheet's or metrics.peak_flops's figure is kept: above 100% there is a FLOP count or a
  // configured figure to question, not a measurement.
  const MfuReading configured = read_mfu(2e12, 1e12, false);
  EXPECT_FALSE(configured.raised);
  EXPECT_DOUBLE_EQ(configured.mfu, 2.0);
}

TEST(PeakFlops, ACoresBestMatmulIsMeasuredOnOneThreadAndTheThreadsComeBack) {
  const int before = at::get_num_threads();
  apply_thread_budget(choose_thread_budget(2, 1, "2", "2", BlasPool::kOwn));
  for (at::ScalarType dtype : {at::kFloat, at::kDouble}) {
    const double best = measured_core_flops(dtype, 128, 0.05);
    const double mean = measured_matmul_flops(128, 0.05, kCpu, dtype);
    std::printf("128 x 128 %s on the CPU: best one-thread %.3g FLOP/s, mean on %d threads %.3g\n",
                c10::toString(dtype), best, at::get_num_threads(), mean);
    EXPECT_GT(best, 1e6) << dtype;
  }
  EXPECT_EQ(at::get_num_threads(), 2);  // given back
  at::set_num_threads(before);
}

// NOTE [GPU-verified]: the device table is CUDA-only code no GPU has run yet, so a CUDA job
// keeps the host CPU's figure unless it opts in.
TEST(PeakFlops, TheDeviceTableIsNotTakenBeforeAGpuHasRunIt) {
  ASSERT_FALSE(device_peaks_taken()) << "verified on a GPU: this test's premise is gone";
  const PeakFlops gpu = job_peak_flops(0, kGpu, at::kBFloat16);  // measures on the CPU only
  EXPECT_GT(gpu.flops, 0);
  EXPECT_NE(gpu.source.find("measured on the host CPU, not cuda:0's peak: the device table is "
                            "not yet run on a GPU"),
            std::string::npos)
      << gpu.source;
  kernels::set_unverified_kernels(true);
  EXPECT_TRUE(device_peaks_taken());
  kernels::set_unverified_kernels(false);
}

TEST(PeakFlops, AMeasuredMatmulRateIsPositiveInEachDtype) {
  for (at::ScalarType dtype : {at::kFloat, at::kDouble, at::kBFloat16}) {
    const double rate = measured_matmul_flops(64, 0.01, kCpu, dtype);
    std::printf("64 x 64 %s matmuls on the CPU: %.3g FLOP/s\n", c10::toString(dtype), rate);
    EXPECT_GT(rate, 1e6) << dtype;
  }
}

}  // namespace
}  // namespace vescale
