// NOTE [Fused LM loss] on one rank: the chunked kernel's loss and gradients against the unfused
// head (x w^T, the padded rows masked with -inf, float32 cross entropy for lower precision x),
// for chunks of 1 row, a few rows that do not divide the batch, and all rows; with padding and
// without; by both routes (passes, log-softmax); scaled by an upstream gradient other than 1.
#include "dtensor/linear_cross_entropy.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "support/expect_close.h"

namespace vescale {
namespace {

using testing::expect_close;

struct Case {
  at::ScalarType dtype;
  double rtol, atol;
};

/// Loss, dx and dw of `loss_fn(x, w)` times `upstream`, on fresh leaves.
template <typename Fn>
std::vector<at::Tensor> loss_and_grads(Fn loss_fn, const at::Tensor& x, const at::Tensor& w,
                                       double upstream) {
  const at::Tensor xl = x.detach().clone().requires_grad_();
  const at::Tensor wl = w.detach().clone().requires_grad_();
  const at::Tensor loss = loss_fn(xl, wl);
  (loss * upstream).backward();
  return {loss.detach().to(at::kDouble), xl.grad().to(at::kDouble), wl.grad().to(at::kDouble)};
}

at::Tensor unfused(const at::Tensor& x, const at::Tensor& w, const at::Tensor& t, int64_t real) {
  at::Tensor logits = at::mm(x, w.t());
  if (real < w.size(0)) {
    at::Tensor mask = at::zeros({w.size(0)}, logits.options());
    mask.slice(0, real).fill_(-std::numeric_limits<double>::infinity());
    logits = logits + mask;
  }
  if (logits.scalar_type() == at::kBFloat16) logits = logits.to(at::kFloat);
  return at::cross_entropy_loss(logits, t, {}, at::Reduction::Mean);
}

TEST(LinearCrossEntropy, MatchesTheUnfusedHeadForEveryChunking) {
  const int64_t n = 10, c = 12, v = 24;
  at::manual_seed(3);
  const at::Tensor x64 = at::randn({n, c}, at::kDouble);
  const at::Tensor w64 = at::randn({v, c}, at::kDouble) * 0.5;
  const char* names[] = {"loss", "dx", "dw"};
  for (const Case& k : {Case{at::kDouble, 1e-13, 1e-14}, Case{at::kFloat, 1e-5, 1e-6},
                        Case{at::kBFloat16, 2e-2, 2e-3}}) {
    const at::Tensor x = x64.to(k.dtype), w = w64.to(k.dtype);
    for (int64_t real : {v, int64_t{17}}) {
      const at::Tensor t = at::randint(real, {n}, at::kLong);
      const std::vector<at::Tensor> ref = loss_and_grads(
          [&](const at::Tensor& a, const at::Tensor& b) { return unfused(a, b, t, real); }, x, w,
          0.25);
      for (const auto route : {local::LossRoute::kPasses, local::LossRoute::kLogSoftmax}) {
        for (int64_t chunk : {int64_t{1}, int64_t{3}, n}) {
          local::VocabSlice vocab;
          vocab.real = real;
          const std::vector<at::Tensor> got = loss_and_grads(
              [&](const at::Tensor& a, const at::Tensor& b) {
                return local::linear_cross_entropy(a, b, t, vocab, static_cast<double>(n), chunk,
                                                   route);
              },
              x, w, 0.25);
          for (size_t i = 0; i < got.size(); ++i) {
            const std::string label =
                std::string(at::toString(k.dtype)) + " " + names[i] + ", " + std::to_string(real) +
                " real rows of " + std::to_string(v) + ", chunks of " + std::to_string(chunk) +
                (route == local::LossRoute::kPasses ? ", passes" : ", log-softmax");
            const double err = expect_close(got[i], ref[i], k.rtol, k.atol, label);
            std::printf("%s: max relative error %.3g\n", label.c_str(), err);
          }
          // The padded rows get no gradient at all.
          if (real < v) {
            EXPECT_EQ(got[2].slice(0, real).abs().max().item<double>(), 0.0);
          }
        }
      }
    }
  }
}

TEST(LinearCrossEntropy, ChunksKeepTheirLogitsWithinTheBudget) {
  EXPECT_EQ(local::chunk_rows_for(16384, 50304, int64_t{64} << 20), 333);
  EXPECT_EQ(local::chunk_rows_for(10, 24, int64_t{64} << 20), 10);
  EXPECT_EQ(local::chunk_rows_for(10, int64_t{1} << 40, 1), 1);
}

TEST(LinearCrossEntropy, WithoutGradModeKeepsNoGraph) {
  const at::Tensor x = at::randn({4, 3}, at::kDouble).requires_grad_();
  const at::Tensor w = at::randn({5, 3}, at::kDouble).requires_grad_();
  const at::Tensor t = at::randint(5, {4}, at::kLong);
  local::VocabSlice vocab;
  vocab.real = 5;
  {
    const at::NoGradGuard no_grad;
    EXPECT_FALSE(local::linear_cross_entropy(x, w, t, vocab, 4.0).requires_grad());
  }
  EXPECT_TRUE(local::linear_cross_entropy(x, w, t, vocab, 4.0).requires_grad());
}

}  // namespace
}  // namespace vescale
