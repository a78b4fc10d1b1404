// NOTE [Direct BLAS matmul]: the direct path gives at::matmul's values for every layout it takes,
// writes into strided outputs in place, accumulates with beta = 1, and everything else falls
// back to ATen.
#include "core/blas.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "support/tensors.h"

namespace vescale {
namespace {

using testing::pattern;

at::Tensor f32(const std::vector<int64_t>& shape, double phase) {
  return pattern(shape, phase).to(at::kFloat);
}

TEST(DirectBlasMatmul, MatchesAtenForRowMajorTransposedSlicedAndHeadOperands) {
  ASSERT_TRUE(blas::has_direct_sgemm()) << "LibTorch here links a CBLAS (OpenBLAS)";
  c10::AutoGradMode no_grad(false);
  const at::Tensor a = f32({5, 7, 9}, 0.1), b = f32({5, 9, 6}, 0.2);
  struct Case {
    std::string name;
    at::Tensor a, b;
  };
  const std::vector<Case> cases = {
      {"row-major", a, b},
      {"sliced a", f32({5, 12, 9}, 0.3).slice(1, 2, 9), b},
      {"transposed a", f32({5, 9, 7}, 0.4).transpose(1, 2), b},
      {"transposed b", a, f32({5, 6, 9}, 0.5).transpose(1, 2)},
      // [B, T, H, D] memory seen as [B, H, T, D], as attention's heads are.
      {"4-D head views", f32({2, 7, 3, 9}, 0.6).transpose(1, 2),
       f32({2, 9, 3, 6}, 0.7).transpose(1, 2)},
  };
  for (const Case& c : cases) {
    const at::Tensor expected = at::matmul(c.a, c.b) * 0.25;
    at::Tensor out = at::empty(expected.sizes(), expected.options());
    blas::matmul_into(out, c.a, c.b, 0.25, 0.0);
    const double error = (out - expected).abs().max().item<double>();
    std::printf("[blas matmul] %s: max |direct - at::matmul| %.2e\n", c.name.c_str(), error);
    EXPECT_LE(error, 1e-6) << c.name;
  }
}

TEST(DirectBlasMatmul, WritesAndAccumulatesIntoAStridedSliceOnly) {
  c10::AutoGradMode no_grad(false);
  const at::Tensor a = f32({2, 3, 4, 5}, 0.1), b = f32({2, 3, 5, 6}, 0.2);
  // Output rows 2..5 of [2, 3, 8, 6] heads over [2, 8, 3, 6] memory filled with 7.
  const at::Tensor memory = at::full({2, 8, 3, 6}, 7.0, a.options());
  const at::Tensor slice = memory.transpose(1, 2).slice(2, 2, 6);
  blas::matmul_into(slice, a, b, 0.5, 1.0);
  const at::Tensor expected = 7.0 + at::matmul(a, b) * 0.5;
  EXPECT_LE((slice - expected).abs().max().item<double>(), 1e-6);
  EXPECT_TRUE(at::equal(memory.slice(1, 0, 2), at::full({2, 2, 3, 6}, 7.0, a.options())));
  EXPECT_TRUE(at::equal(memory.slice(1, 6, 8), at::full({2, 2, 3, 6}, 7.0, a.options())));
  blas::matmul_into(slice, a, b, 1.0, 0.0);  // beta = 0 overwrites
  EXPECT_LE((slice - at::matmul(a, b)).abs().max().item<double>(), 1e-6);
}

TEST(DirectBlasMatmul, OtherDtypesAndLayoutsFallBackAndAutogradIsRefused) {
  c10::AutoGradMode no_grad(false);
  const at::Tensor a = pattern({3, 4, 5}, 0.1), b = pattern({3, 5, 2}, 0.2);  // float64
  at::Tensor out = at::empty({3, 4, 2}, a.options());
  blas::matmul_into(out, a, b, 2.0, 0.0);
  EXPECT_TRUE(at::equal(out, at::matmul(a, b) * 2.0));
  // No unit stride in the matrix dims: ATen reads it.
  const at::Tensor every_other = f32({3, 8, 10}, 0.3).slice(1, 0, 8, 2).slice(2, 0, 10, 2);
  const at::Tensor right = f32({3, 5, 2}, 0.4);
  at::Tensor out32 = at::empty({3, 4, 2}, right.options());
  blas::matmul_into(out32, every_other, right, 1.0, 0.0);
  EXPECT_TRUE(at::allclose(out32, at::matmul(every_other, right)));
  {
    c10::AutoGradMode grad(true);
    const at::Tensor leaf = right.clone().requires_grad_();
    EXPECT_THROW(blas::matmul_into(out32, every_other, leaf, 1.0, 0.0), c10::Error);
  }
  EXPECT_THROW(blas::matmul_into(out32, every_other, right, 1.0, 0.5), c10::Error);
}

}  // namespace
}  // namespace vescale
