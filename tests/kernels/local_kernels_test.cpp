// NOTE [Blocked causal attention] against NOTE [Explicit attention]: the same values and
// gradients up to rounding, at sequence lengths that fill their blocks and that do not.
#include "kernels/local_kernels.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "support/expect_close.h"
#include "support/tensors.h"

namespace vescale {
namespace {

using testing::expect_close;
using testing::pattern;

struct Case {
  at::ScalarType dtype;
  double rtol, atol;
};

/// Runs one kernel on fresh leaves from `inputs`; returns its output and the inputs' gradients
/// under `upstream`.
template <typename Kernel>
std::vector<at::Tensor> output_and_grads(Kernel kernel, const std::vector<at::Tensor>& inputs,
                                         const at::Tensor& upstream) {
  std::vector<at::Tensor> leaves;
  for (const at::Tensor& x : inputs)
    leaves.push_back(x.detach().clone().requires_grad_());
  const at::Tensor out = kernel(leaves[0], leaves[1], leaves[2]);
  out.backward(upstream);
  return {out.detach(), leaves[0].grad(), leaves[1].grad(), leaves[2].grad()};
}

TEST(BlockedCausalAttention, MatchesTheExplicitKernelValuesAndGradients) {
  const char* names[] = {"output", "dq", "dk", "dv"};
  for (const Case& c : {Case{at::kDouble, 1e-12, 1e-13}, Case{at::kFloat, 1e-4, 2e-6},
                        Case{at::kBFloat16, 0.05, 0.02}}) {
    // 64: two blocks of 32; 100: the last block has 4 rows; 128: 4 blocks; 520: blocks of 96.
    for (int64_t t : {64, 100, 128, 520}) {
      // q, k, v as the model makes them: [B, T, H, D] transposed to [B, H, T, D] (not contiguous).
      std::vector<at::Tensor> qkv;
      for (int i = 0; i < 3; ++i)
        qkv.push_back(pattern({2, t, 3, 8}, 0.4 * (i + 1)).to(c.dtype).transpose(1, 2));
      const at::Tensor upstream = pattern({2, 3, t, 8}, 0.9).to(c.dtype);
      const auto blocked = output_and_grads(local::blocked_causal_attention, qkv, upstream);
      const auto reference = output_and_grads(local::causal_attention, qkv, upstream);
      for (size_t i = 0; i < blocked.size(); ++i) {
        ASSERT_EQ(blocked[i].scalar_type(), c.dtype);
        const at::Tensor actual = blocked[i].to(at::kDouble),
                         expected = reference[i].to(at::kDouble);
        expect_close(actual, expected, c.rtol, c.atol,
                     std::string(names[i]) + " at T = " + std::to_string(t));
        std::printf("[blocked attention] %s T=%lld %s: max |difference| / max |explicit| %.2e\n",
                    c10::toString(c.dtype), static_cast<long long>(t), names[i],
                    ((actual - expected).abs().max() / expected.abs().max()).item<double>());
      }
    }
  }
}

TEST(BlockedCausalAttention, ShortSequencesTakeTheExplicitKernelBitwise) {
  std::vector<at::Tensor> qkv;
  for (int i = 0; i < 3; ++i)
    qkv.push_back(pattern({2, 3, 40, 8}, 0.4 * (i + 1)).to(at::kFloat));
  const at::Tensor upstream = pattern({2, 3, 40, 8}, 0.9).to(at::kFloat);
  const auto blocked = output_and_grads(local::blocked_causal_attention, qkv, upstream);
  const auto reference = output_and_grads(local::causal_attention, qkv, upstream);
  for (size_t i = 0; i < blocked.size(); ++i)
    EXPECT_TRUE(at::equal(blocked[i], reference[i])) << i;
}

}  // namespace
}  // namespace vescale
