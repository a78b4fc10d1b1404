// NOTE [MFU peak]: the device table by GPU name and compute capability, the measured fallback
// for a GPU it does not know, and the CPU's measured float32 rate as before.
#include "train/peak_flops.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <utility>
#include <vector>

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

TEST(PeakFlops, TheCpuKeepsItsMeasuredFloat32Rate) {
  FakeMeasure measure;
  const PeakFlops cpu = device_peak_flops(kCpu, {}, at::kBFloat16, false, measure.fn());
  EXPECT_DOUBLE_EQ(cpu.flops, measure.rate);
  ASSERT_EQ(measure.asked.size(), 1u);
  EXPECT_EQ(measure.asked[0].first, kCpu);
  EXPECT_EQ(measure.asked[0].second, at::kFloat);  // whatever the job computes, as before
  // metrics.peak_flops overrides everything; the driver knows nothing of the CPU.
  EXPECT_DOUBLE_EQ(job_peak_flops(3e12, kCpu, at::kFloat).flops, 3e12);
  EXPECT_EQ(job_peak_flops(3e12, kCpu, at::kFloat).source, "metrics.peak_flops");
  EXPECT_TRUE(gpu_facts(kCpu).name.empty());
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
