// NOTE [Fast paths]: which fast kernels a build has, where the kernel table (NOTE [Kernel table])
// applies them, and the summaries written from it. On Debian's LibTorch 1.13 (the CPU build)
// every fused flag is off and the explicit kernels are the only path.
#include "kernels/kernel_table.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cctype>

#include "comm/group.h"
#include "core/error.h"
#include "kernels/fused.h"
#include "support/tensors.h"

namespace vescale::kernels {
namespace {

using testing::kGpu;

bool use_fused_attention(Device device, at::ScalarType dtype) {
  return choose(kAttentionPaths, {device, dtype}).id == AttentionPathId::kFused;
}
bool use_blocked_attention(Device device, at::ScalarType dtype) {
  return choose(kAttentionPaths, {device, dtype}).id == AttentionPathId::kBlocked;
}
bool use_fused_adamw(Device device, at::ScalarType dtype) {
  return choose(kAdamWPaths, {device, dtype}).id == AdamWPathId::kFused;
}
bool use_tf32_matmul(Device device, at::ScalarType dtype) {
  return choose(kMatmulPrecisionPaths, {device, dtype}).id == MatmulPrecisionId::kTf32;
}

const bool kHasFusedAttention = kThisBuild.fused_attention;
const bool kHasFusedAdamW = kThisBuild.fused_adamw;

TEST(FastPaths, FlagsFollowTheLibTorchVersion) {
  EXPECT_EQ(kHasFusedAttention, TORCH_VERSION_MAJOR >= 2);
  EXPECT_EQ(kHasFusedAdamW,
            TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1));
  EXPECT_TRUE(kThisBuild.tf32_control);  // 1.12 and later
#if TORCH_VERSION_MAJOR < 2
  // The CPU build machine's LibTorch 1.13: no fused kernel is compiled in.
  EXPECT_FALSE(kHasFusedAttention);
  EXPECT_FALSE(kHasFusedAdamW);
#endif
}

TEST(FastPaths, FusedKernelsOnlyOnCudaAndNeverInFloat64) {
  for (at::ScalarType dtype : {at::kFloat, at::kDouble, at::kBFloat16}) {
    EXPECT_FALSE(use_fused_attention(kCpu, dtype)) << dtype;
    EXPECT_FALSE(use_fused_adamw(kCpu, dtype)) << dtype;
    EXPECT_FALSE(use_tf32_matmul(kCpu, dtype)) << dtype;
  }
  EXPECT_FALSE(use_fused_attention(kGpu, at::kDouble));
  EXPECT_FALSE(use_fused_adamw(kGpu, at::kDouble));
  EXPECT_FALSE(use_tf32_matmul(kGpu, at::kDouble));
  EXPECT_FALSE(use_tf32_matmul(kGpu, at::kBFloat16));  // TF32 rounds float32 operands only
  EXPECT_EQ(use_fused_attention(kGpu, at::kFloat), kHasFusedAttention);
  EXPECT_EQ(use_fused_adamw(kGpu, at::kFloat), kHasFusedAdamW);
  EXPECT_EQ(use_tf32_matmul(kGpu, at::kFloat), kThisBuild.tf32_control);
}

/// The name setFloat32MatmulPrecision takes (LibTorch 2.x keeps only the string form).
const char* precision_name(at::Float32MatmulPrecision p) {
  switch (p) {
    case at::Float32MatmulPrecision::HIGHEST:
      return "highest";
    case at::Float32MatmulPrecision::HIGH:
      return "high";
    default:
      return "medium";
  }
}

TEST(FastPaths, Tf32OnlyForFloat32OnCuda) {
  at::Context& context = at::globalContext();
  const std::string before = precision_name(context.float32MatmulPrecision());
  context.setFloat32MatmulPrecision("highest");
  EXPECT_FALSE(configure_matmul_precision(kCpu, at::kFloat));
  EXPECT_FALSE(configure_matmul_precision(kGpu, at::kDouble));
  EXPECT_EQ(context.float32MatmulPrecision(), at::Float32MatmulPrecision::HIGHEST);
  // The setting itself is process-wide and device-free, so it can be checked without a GPU.
  EXPECT_TRUE(configure_matmul_precision(kGpu, at::kFloat));
  EXPECT_EQ(context.float32MatmulPrecision(), at::Float32MatmulPrecision::HIGH);
  context.setFloat32MatmulPrecision(before);
}

TEST(FastPaths, SummariesSayWhatIsOnAndWhy) {
  // NOTE [CUDA kernels]: ours are built with nvcc, and float64 keeps ATen's ops.
  const std::string ours = VESCALE_HAS_CUDA_KERNELS ? "float64 is the reference" : "needs nvcc";
  EXPECT_EQ(
      fast_paths_summary(kGpu, at::kDouble),
      "fused attention off (" +
          std::string(kHasFusedAttention ? "float64 is the reference" : "needs LibTorch 2.0") +
          "), blocked attention off (float64 is the reference), fused AdamW off (" +
          (kHasFusedAdamW ? "float64 is the reference" : "needs LibTorch 2.1") +
          "), TF32 matmuls off (float64 is the reference), LM loss kernel off (" + ours +
          "), log-softmax loss on (" + gpu_run_text(kLossPaths[1].gpu_run) +
          "), widened log-softmax loss off (bfloat16 and float16 logits only), SwiGLU kernel off "
          "(" +
          ours + "), rotary kernel off (" + ours + "), add + norm kernel off (" + ours +
          "), grouped GEMM kernel off (" + ours + ")");
  const std::string cpu = fast_paths_summary(kCpu, at::kFloat);
  EXPECT_NE(cpu.find("TF32 matmuls off (CUDA only)"), std::string::npos) << cpu;
  EXPECT_NE(cpu.find("blocked attention on"), std::string::npos) << cpu;
  EXPECT_TRUE(use_blocked_attention(kCpu, at::kFloat));
  EXPECT_TRUE(use_blocked_attention(kCpu, at::kBFloat16));
  EXPECT_FALSE(use_blocked_attention(kCpu, at::kDouble));
  EXPECT_EQ(use_blocked_attention(kGpu, at::kFloat), !kHasFusedAttention);
  EXPECT_NE(fast_paths_summary(kGpu, at::kFloat).find("TF32 matmuls on"), std::string::npos);
  const std::string build = build_summary(comm::nccl_version());
  // NOTE [CUDA kernels]: --version says whether nvcc built ours.
  EXPECT_NE(build.find(std::string("CUDA kernels of our own: ") +
                       (VESCALE_HAS_CUDA_KERNELS ? "built by nvcc" : "not built")),
            std::string::npos)
      << build;
  EXPECT_NE(build.find("LibTorch " TORCH_VERSION), std::string::npos) << build;
#if TORCH_VERSION_MAJOR < 2
  EXPECT_NE(build.find("fast paths built in: TF32 matmuls (used on CUDA"), std::string::npos)
      << build;
#endif
}

TEST(FastPaths, BuildSummaryNamesCudaAndNcclOfACudaBuild) {
  // This project's NCCL builds are CUDA builds and its CPU builds have neither.
  const std::string cuda = cuda_build_version();
  const std::string nccl = comm::nccl_version();
  EXPECT_EQ(cuda.empty(), nccl.empty()) << "CUDA '" << cuda << "', NCCL '" << nccl << "'";
  const std::string build = build_summary(nccl);
  if (cuda.empty()) {
    EXPECT_NE(build.find("(CPU only)"), std::string::npos) << build;
    return;
  }
  // "12.4", "2.22.3": numbers, not placeholders.
  EXPECT_TRUE(std::isdigit(static_cast<unsigned char>(cuda.front())) &&
              cuda.find('.') != std::string::npos)
      << cuda;
  EXPECT_NE(build.find(fmt::format("(CUDA {}, NCCL {}; ", cuda, nccl)), std::string::npos) << build;
  EXPECT_NE(build.find(cuda_device_count() == 0 ? "no GPU visible" : "GPU(s) visible"),
            std::string::npos)
      << build;
  EXPECT_EQ(build.find("CPU only"), std::string::npos) << build;
}

TEST(FastPaths, FusedKernelsRefuseToRunWithoutLibTorchSupport) {
  if (kHasFusedAttention && kHasFusedAdamW) GTEST_SKIP() << "this LibTorch has both kernels";
  const at::Tensor q = at::zeros({1, 1, 2, 2});
  if (!kHasFusedAttention) {
    EXPECT_THROW(fused::causal_attention(q, q, q), Error);
  }
  at::Tensor p = at::zeros({4});
  if (!kHasFusedAdamW) {
    EXPECT_THROW(fused::adamw_step({{p}, {p}, {p}, {p}, {}}, {0.1, 0.9, 0.95, 1e-8, 0.0, 1}),
                 Error);
    EXPECT_NO_THROW(fused::adamw_step({}, {0.1, 0.9, 0.95, 1e-8, 0.0, 1}));  // nothing to do
  }
}

}  // namespace
}  // namespace vescale::kernels
