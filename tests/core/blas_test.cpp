// NOTE [Direct BLAS bmm]: the direct path gives at::bmm's values for every layout it takes, and
// everything else falls back to at::bmm.
#include "core/blas.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdio>

#include "support/tensors.h"

namespace vescale {
namespace {

using testing::pattern;

TEST(DirectBlasBmm, MatchesAtenBmmForRowMajorTransposedAndSlicedOperands) {
  ASSERT_TRUE(blas::has_direct_sgemm()) << "LibTorch here links a CBLAS (OpenBLAS)";
  const at::Tensor a = pattern({5, 7, 9}, 0.1).to(at::kFloat);
  const at::Tensor b = pattern({5, 9, 6}, 0.2).to(at::kFloat);
  const at::Tensor wide = pattern({5, 12, 9}, 0.3).to(at::kFloat);  // rows 2..9: a slice
  const at::Tensor bt = pattern({5, 6, 9}, 0.4).to(at::kFloat);     // b as a transposed view
  const at::Tensor at_ = pattern({5, 9, 7}, 0.5).to(at::kFloat);    // a as a transposed view
  struct Case {
    const char* name;
    at::Tensor a, b;
  };
  for (const Case& c :
       {Case{"row-major", a, b}, Case{"sliced a", wide.slice(1, 2, 9), b},
        Case{"transposed b", a, bt.transpose(1, 2)}, Case{"transposed a", at_.transpose(1, 2), b},
        Case{"both transposed", at_.transpose(1, 2), bt.transpose(1, 2)}}) {
    const at::Tensor out = blas::bmm(c.a, c.b, 0.25);
    const at::Tensor expected = at::bmm(c.a, c.b) * 0.25;
    EXPECT_TRUE(out.is_contiguous()) << c.name;
    const double error = (out - expected).abs().max().item<double>();
    std::printf("[blas bmm] %s: max |direct - at::bmm| %.2e\n", c.name, error);
    EXPECT_LE(error, 1e-6) << c.name;
  }
}

TEST(DirectBlasBmm, OtherDtypesAndRecordedGradientsFallBackToAtenBmm) {
  const at::Tensor a = pattern({3, 4, 5}, 0.1), b = pattern({3, 5, 2}, 0.2);  // float64
  EXPECT_TRUE(at::equal(blas::bmm(a, b, 2.0), at::bmm(a, b) * 2.0));
  // A leaf that needs grad, with grad mode on: the result must carry autograd history.
  const at::Tensor leaf = a.to(at::kFloat).requires_grad_();
  const at::Tensor out = blas::bmm(leaf, b.to(at::kFloat));
  ASSERT_TRUE(out.requires_grad());
  out.sum().backward();
  EXPECT_TRUE(leaf.grad().defined());
  // A layout the BLAS cannot read (no unit stride in the matrix dims) is copied by at::bmm.
  const at::Tensor strided =
      pattern({3, 8, 10}, 0.3).to(at::kFloat).slice(1, 0, 8, 2).slice(2, 0, 10, 2);
  const at::Tensor right = pattern({3, 5, 2}, 0.4).to(at::kFloat);
  EXPECT_TRUE(at::allclose(blas::bmm(strided, right), at::bmm(strided, right)));
}

}  // namespace
}  // namespace vescale
