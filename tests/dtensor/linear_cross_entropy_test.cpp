// NOTE [Fused LM loss] on one rank: the chunked kernel's loss and gradients against the unfused
// head (x w^T, the padded rows masked with -inf, float32 cross entropy for lower precision x),
// for chunks of 1 row, a few rows that do not divide the batch, and all rows; with padding and
// without; by every row of the loss table (passes, log-softmax, widened log-softmax); scaled by an
// upstream gradient other than 1. And each row the table picks for a CUDA device, faked in the
// table's context, run on the CPU: a row makes the same ATen calls on every device.
#include "dtensor/linear_cross_entropy.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "core/ignore_target.h"
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
      for (const kernels::LossPath& route : kernels::kLossPaths) {
        // Our CUDA kernel runs on a GPU only: kernel_table_test compares it with these rows.
        if (route.id == kernels::LossPathId::kKernel) continue;
        for (int64_t chunk : {int64_t{1}, int64_t{3}, n}) {
          local::VocabSlice vocab;
          vocab.real = real;
          const std::vector<at::Tensor> got = loss_and_grads(
              [&](const at::Tensor& a, const at::Tensor& b) {
                return local::linear_cross_entropy(a, b, t, vocab, static_cast<double>(n), chunk,
                                                   route.id);
              },
              x, w, 0.25);
          for (size_t i = 0; i < got.size(); ++i) {
            const std::string label = std::string(at::toString(k.dtype)) + " " + names[i] + ", " +
                                      std::to_string(real) + " real rows of " + std::to_string(v) +
                                      ", chunks of " + std::to_string(chunk) + ", " + route.name;
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

// Issue [31]: the log-softmax row once passed ATen's half_to_float flag for bf16 logits on CUDA,
// whose kernel converts float16 only: bf16 training died at its first step. No CPU test ran
// that call, as the CPU took another branch. Now the table picks the row from (device, dtype)
// and the row asks nothing of the device, so the rows a CUDA device gets run here as they
// would there.
TEST(LinearCrossEntropy, TheRowsOfAFakedCudaDeviceRunOnTheCpu) {
  const Device cuda(c10::kCUDA, 0);  // a name for the table: nothing is allocated on it
  const int64_t rows = 9, columns = 50;
  at::manual_seed(7);
  const at::Tensor logits64 = at::randn({rows, columns}, at::kDouble) * 3;
  const at::Tensor t = at::randint(columns, {rows}, at::kLong);
  local::VocabSlice vocab;
  vocab.real = columns;
  const double n = 16;
  struct Expect {
    at::ScalarType dtype;
    bool opted_in;
    kernels::LossPathId row;
    double tolerance;  // of the loss (float32 from the same logits) and of the gradient's dtype
  };
  for (const Expect& e : {
           Expect{at::kBFloat16, false, kernels::LossPathId::kPasses, 1e-2},
           Expect{at::kBFloat16, true, kernels::LossPathId::kWidenedLogSoftmax, 1e-2},
           Expect{at::kHalf, false, kernels::LossPathId::kPasses, 2e-3},
           Expect{at::kHalf, true, kernels::LossPathId::kWidenedLogSoftmax, 2e-3},
           Expect{at::kFloat, false, kernels::LossPathId::kLogSoftmax, 1e-5},
       }) {
    kernels::KernelContext context{cuda, e.dtype};
    context.unverified = e.opted_in;
    context.build.cuda_kernels = false;  // our kernel needs a GPU (kernel_table_test runs it)
    const kernels::LossPath& row = kernels::choose(kernels::kLossPaths, context);
    const std::string label = fmt::format("cuda (faked) {}{}: {}", c10::toString(e.dtype),
                                          e.opted_in ? ", unverified rows taken" : "", row.name);
    EXPECT_EQ(row.id, e.row) << label;
    // The reference from the very logits the row sees, in float64.
    const at::Tensor logits = logits64.to(e.dtype);
    const at::Tensor logp = at::log_softmax(logits.to(at::kDouble), 1);
    const double loss_ref = -logp.gather(1, t.unsqueeze(1)).sum().item<double>();
    const at::Tensor grad_ref = (logp.exp() - at::one_hot(t, columns).to(at::kDouble)) / n;
    const local::LossChunk got =
        local::loss_chunk(row.id, logits, t, vocab, at::kFloat, n, /*grad=*/true);
    EXPECT_EQ(got.loss.scalar_type(), at::kFloat) << label;
    EXPECT_EQ(got.grad.scalar_type(), e.dtype) << label;
    const double loss_error = std::abs(got.loss.item<double>() - loss_ref) / std::abs(loss_ref);
    const double grad_error = (got.grad.to(at::kDouble) - grad_ref).abs().max().item<double>() /
                              grad_ref.abs().max().item<double>();
    std::printf("%s: loss relative error %.3g, gradient %.3g\n", label.c_str(), loss_error,
                grad_error);
    EXPECT_LE(loss_error, e.tolerance) << label;
    EXPECT_LE(grad_error, e.tolerance) << label;
  }
}

// NOTE [Loss masks]: targets of kIgnoreTarget add no loss and no gradient, and the sum is divided
// by the normalizer given: against ATen's mean over the targets it does not ignore, chunk by
// chunk; and a CUDA device (faked) takes the pass-by-pass row for masked targets.
TEST(LinearCrossEntropy, MaskedTargetsCountNothing) {
  const int64_t n = 11, c = 6, v = 20;
  at::manual_seed(5);
  const at::Tensor x = at::randn({n, c}, at::kDouble);
  const at::Tensor w = at::randn({v, c}, at::kDouble) * 0.5;
  at::Tensor t = at::randint(17, {n}, at::kLong);
  for (int64_t i : {0, 3, 4, 10})
    t[i] = kIgnoreTarget;
  const double trained = static_cast<double>(n - 4);
  const std::vector<at::Tensor> ref = loss_and_grads(
      [&](const at::Tensor& a, const at::Tensor& b) { return unfused(a, b, t, 17); }, x, w, 0.5);
  for (int64_t chunk : {int64_t{1}, int64_t{4}, n}) {
    local::VocabSlice vocab;
    vocab.real = 17;
    const std::vector<at::Tensor> got = loss_and_grads(
        [&](const at::Tensor& a, const at::Tensor& b) {
          return local::linear_cross_entropy(a, b, t, vocab, trained, chunk, std::nullopt,
                                             /*masked=*/true);
        },
        x, w, 0.5);
    const char* names[] = {"loss", "dx", "dw"};
    for (size_t i = 0; i < got.size(); ++i) {
      const std::string label = fmt::format("masked targets, chunks of {}: {}", chunk, names[i]);
      std::printf("%s: max relative error %.3g\n", label.c_str(),
                  expect_close(got[i], ref[i], 1e-13, 1e-14, label));
    }
    // The ignored rows' hidden states get no gradient.
    EXPECT_EQ(got[1][3].abs().max().item<double>(), 0.0);
  }
  kernels::KernelContext context{Device(c10::kCUDA, 0), at::kFloat};
  context.masked_targets = true;
  context.build.cuda_kernels = false;
  EXPECT_EQ(kernels::choose(kernels::kLossPaths, context).id, kernels::LossPathId::kPasses);
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
