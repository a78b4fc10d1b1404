// Our CUDA kernels (NOTE [CUDA kernels]) at the shapes and inputs that the kernel table's test
// (kernel_table_test.cpp, small shapes against the CPU's explicit rows) never gives them: grid-
// stride loops past one grid (SwiGLU and rotary past 2^24 threads' work, add + norm past 65,535
// rows), a loss chunk past 2^31 elements, rows of -inf and a NaN row, 300 groups with deep rows
// and group ends that miss the rows, views that are not contiguous, and a stream from the pool.
// Each test is named after its kernel, so that scripts/gpu-check.sh runs a kernel's tests (with
// the table's: NOTE [Kernel tests a process each]) in a process of their own. They need a GPU and
// a build with our kernels, and skip elsewhere.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "dtensor/linear_cross_entropy.h"
#include "kernels/cuda_kernels.h"
#include "kernels/kernel_table.h"
#include "kernels/local_kernels.h"
#include "support/tensors.h"

#if VESCALE_HAS_CUDA_KERNELS
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace vescale::kernels {
namespace {

using testing::pattern;
using Outputs = std::vector<at::Tensor>;
using testing::kGpu;

/// Why these tests cannot run here, or "" when they can.
std::string why_skip() {
  if (!VESCALE_HAS_CUDA_KERNELS) return "built without our CUDA kernels (nvcc, a CUDA LibTorch)";
  if (!at::hasCUDA()) return "no GPU: our CUDA kernels run where one is";
  return "";
}

#define SKIP_WITHOUT_OUR_KERNELS() \
  if (const std::string why = why_skip(); !why.empty()) GTEST_SKIP() << why

/// `t` in bf16 (or `dtype`) on the GPU.
at::Tensor on_gpu(const at::Tensor& t, at::ScalarType dtype = at::kBFloat16) {
  return t.to(dtype).to(kGpu);
}

/// The reference's input: `t` as the GPU holds it, in float32 on the CPU.
at::Tensor as_reference(const at::Tensor& t) {
  return t.to(at::kCPU).to(at::kFloat);
}

/// max |got - want| / max |want| over the pairs, printed under `what`; NaNs must sit where the
/// reference has them, and are left out of the figure.
double compare(const std::string& what, const Outputs& got, const Outputs& want) {
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const at::Tensor a = got[i].to(at::kCPU).to(at::kDouble);
    const at::Tensor b = want[i].to(at::kCPU).to(at::kDouble);
    EXPECT_EQ(a.sizes(), b.sizes()) << what << ", output " << i;
    EXPECT_TRUE(at::equal(a.isnan(), b.isnan())) << what << ", output " << i << ": NaNs differ";
    const at::Tensor finite = b.isfinite().logical_and(a.isfinite());
    const at::Tensor fa = a.masked_select(finite), fb = b.masked_select(finite);
    if (fb.numel() == 0) continue;
    const double scale = std::max(fb.abs().max().item<double>(), 1e-30);
    worst = std::max(worst, (fa - fb).abs().max().item<double>() / scale);
  }
  std::printf("[cuda kernels] %s: max |difference| / max |reference| = %.2e\n", what.c_str(),
              worst);
  return worst;
}

/// Each output of `run` on views (`views`: inputs that are not contiguous) is bitwise the output
/// on contiguous copies, and the same on a stream from the pool as on the current stream.
void expect_views_and_pool_stream_alike(const std::string& what,
                                        const std::function<Outputs(const Outputs&)>& run,
                                        const Outputs& views) {
  Outputs contiguous;
  for (const at::Tensor& v : views)
    contiguous.push_back(v.contiguous());
  const Outputs want = run(contiguous);
  const Outputs on_views = run(views);
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_TRUE(at::equal(on_views[i], want[i])) << what << ": output " << i << " on views";
#if VESCALE_HAS_CUDA_KERNELS
  const c10::cuda::CUDAStream pool = c10::cuda::getStreamFromPool(false, kGpu.index());
  Outputs on_pool;
  {
    const c10::cuda::CUDAStreamGuard guard(pool);
    on_pool = run(contiguous);
  }
  pool.synchronize();
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_TRUE(at::equal(on_pool[i], want[i])) << what << ": output " << i << " on a pool stream";
#endif
  std::printf("[cuda kernels] %s: the same bits on views and on a pool stream\n", what.c_str());
}

/// A path's outputs and its inputs' gradients for the output's gradient `grad`.
template <typename Run>
Outputs with_gradients(const Run& run, const Outputs& inputs, const at::Tensor& grad) {
  Outputs leaves;
  for (const at::Tensor& x : inputs)
    leaves.push_back(x.detach().clone().requires_grad_());
  const at::Tensor out = run(leaves);
  out.backward(grad);
  Outputs result{out.detach()};
  for (const at::Tensor& x : leaves)
    result.push_back(x.grad());
  return result;
}

// ---- SwiGLU -----------------------------------------------------------------------------------

TEST(CudaKernels, SwigluPastOneGrid) {
  SKIP_WITHOUT_OUR_KERNELS();
  // Past one grid of 65,535 blocks of 256 threads (16.78M): 4,100 x 4,095 elements a thread each
  // (not a multiple of 8: the 2-byte kernel), then 16,400 x 8,192 in packs of 8 (the 16-byte one).
  for (const std::vector<int64_t>& shape :
       {std::vector<int64_t>{4100, 4095}, std::vector<int64_t>{16400, 8192}}) {
    const at::Tensor gate = on_gpu(pattern(shape, 0.3).mul(3)), up = on_gpu(pattern(shape, 0.7));
    const at::Tensor grad = on_gpu(pattern(shape, 0.2));
    const auto run = [](const SwigluPath& path) {
      return [&path](const Outputs& in) { return path.run(in[0], in[1]); };
    };
    const Outputs got = with_gradients(run(kSwigluPaths.front()), {gate, up}, grad);
    const Outputs want = with_gradients(run(kSwigluPaths.back()),
                                        {as_reference(gate), as_reference(up)}, as_reference(grad));
    const std::string what =
        "SwiGLU bf16 [" + std::to_string(shape[0]) + ", " + std::to_string(shape[1]) + "]";
    EXPECT_LE(compare(what, got, want), 2e-2) << what;
  }
}

TEST(CudaKernels, SwigluTakesViewsAndAPoolStream) {
  SKIP_WITHOUT_OUR_KERNELS();
  const auto run = [](const Outputs& in) {
    const auto [d_gate, d_up] = cuda_kernels::swiglu_backward(in[2], in[0], in[1]);
    return Outputs{cuda_kernels::swiglu_forward(in[0], in[1]), d_gate, d_up};
  };
  // [41, 6] transposed (strides (1, 6)), then [40, 6]: 246 elements a thread each, 240 in packs.
  for (const int64_t rows : {41, 40}) {
    expect_views_and_pool_stream_alike(
        "SwiGLU", run,
        {on_gpu(pattern({rows, 6}, 0.3)).t(), on_gpu(pattern({rows, 6}, 0.7)).t(),
         on_gpu(pattern({rows, 6}, 0.2)).t()});
  }
}

// ---- rotary -----------------------------------------------------------------------------------

TEST(CudaKernels, RotaryPastTwoToThe24Pairs) {
  SKIP_WITHOUT_OUR_KERNELS();
  // [4, 32, 2064, 128]: 16.9M pairs, a thread each, more than one grid.
  const std::vector<int64_t> shape{4, 32, 2064, 128};
  const at::Tensor x = on_gpu(pattern(shape, 0.4)), grad = on_gpu(pattern(shape, 0.9));
  const auto run = [](const RotaryPath& path, c10::Device device) {
    return [&path, device](const Outputs& in) {
      return path.run(in[0], 10000.0,
                      at::arange(in[0].size(2), at::dtype(at::kLong).device(device)));
    };
  };
  const Outputs got = with_gradients(run(kRotaryPaths.front(), kGpu), {x}, grad);
  const Outputs want =
      with_gradients(run(kRotaryPaths.back(), at::kCPU), {as_reference(x)}, as_reference(grad));
  EXPECT_LE(compare("rotary bf16 [4, 32, 2064, 128]", got, want), 2e-2);
}

TEST(CudaKernels, RotaryTakesViewsAndAPoolStream) {
  SKIP_WITHOUT_OUR_KERNELS();
  const at::Tensor inv_freq = local::rotary_inv_freq(16, 10000.0, at::dtype(at::kFloat));
  const auto run = [&](const Outputs& in) {
    const at::Tensor positions = at::arange(1000, 1000 + in[0].size(2), at::kLong);
    return Outputs{cuda_kernels::rotary(in[0], positions, inv_freq, false),
                   cuda_kernels::rotary(in[0], positions, inv_freq, true)};
  };
  // [B, T, H, D] transposed to [B, H, T, D], as attention hands its heads over.
  expect_views_and_pool_stream_alike("rotary", run,
                                     {on_gpu(pattern({2, 24, 3, 16}, 0.4)).transpose(1, 2)});
}

// ---- residual add + norm ----------------------------------------------------------------------

/// x + delta and its norm, and the gradients of x, delta, w (and b) by a path.
Outputs add_norm_outputs(const AddNormPath& path, NormKind kind, const Outputs& in) {
  const bool layer_norm = kind == NormKind::kLayerNorm;
  Outputs leaves;
  for (size_t i = 0; i < (layer_norm ? 4u : 3u); ++i)
    leaves.push_back(in[i].detach().clone().requires_grad_());
  const auto [sum, normed] =
      path.run(kind, leaves[0], leaves[1], leaves[2], layer_norm ? leaves[3] : at::Tensor(), 1e-5);
  torch::autograd::backward({sum, normed}, {in[4], in[5]});
  Outputs out{sum.detach(), normed.detach()};
  for (const at::Tensor& leaf : leaves)
    out.push_back(leaf.grad());
  return out;
}

TEST(CudaKernels, AddNormPast65535Rows) {
  SKIP_WITHOUT_OUR_KERNELS();
  // 70,000 rows: the forward's grid of at most 65,535 blocks strides over the rest.
  const int64_t rows = 70000, c = 96;
  const Outputs in{on_gpu(pattern({rows, c}, 0.3).mul(2)), on_gpu(pattern({rows, c}, 0.7)),
                   on_gpu(pattern({c}, 0.5).add(1)),       on_gpu(pattern({c}, 0.9)),
                   on_gpu(pattern({rows, c}, 0.2)),        on_gpu(pattern({rows, c}, 0.6))};
  Outputs reference;
  for (const at::Tensor& t : in)
    reference.push_back(as_reference(t));
  for (const NormKind kind : {NormKind::kLayerNorm, NormKind::kRmsNorm}) {
    const char* name = kind == NormKind::kLayerNorm ? "LayerNorm" : "RMSNorm";
    EXPECT_LE(compare(std::string("add + ") + name + " bf16 [70000, 96]",
                      add_norm_outputs(kAddNormPaths.front(), kind, in),
                      add_norm_outputs(kAddNormPaths.back(), kind, reference)),
              5e-2)
        << name;
  }
}

TEST(CudaKernels, AddNormTakesViewsAndAPoolStream) {
  SKIP_WITHOUT_OUR_KERNELS();
  for (const bool layer_norm : {true, false}) {
    const auto run = [layer_norm](const Outputs& in) {
      const cuda_kernels::AddNorm f = cuda_kernels::add_norm_forward(
          layer_norm, in[0], in[1], in[2], layer_norm ? in[3] : at::Tensor(), 1e-5);
      const cuda_kernels::AddNormGrads g =
          cuda_kernels::add_norm_backward(layer_norm, in[4], in[5], f.sum, in[2], f.mean, f.rstd);
      Outputs out{f.sum, f.normed, f.mean, f.rstd, g.d_x, g.d_w};
      if (layer_norm) out.push_back(g.d_b);
      return out;
    };
    // Rows of 48 as the columns of [48, 20] tensors: strides (1, 20).
    Outputs views;
    for (const double phase : {0.3, 0.7})
      views.push_back(on_gpu(pattern({48, 20}, phase)).t());
    views.push_back(on_gpu(pattern({48}, 0.5).add(1)));
    views.push_back(on_gpu(pattern({48}, 0.9)));
    for (const double phase : {0.2, 0.6})
      views.push_back(on_gpu(pattern({48, 20}, phase)).t());
    expect_views_and_pool_stream_alike(layer_norm ? "add + LayerNorm" : "add + RMSNorm", run,
                                       views);
  }
}

// ---- LM loss ----------------------------------------------------------------------------------

TEST(CudaKernels, LmLossPastTwoToThe31Elements) {
  SKIP_WITHOUT_OUR_KERNELS();
  // bf16 [43000, 50304]: 2.16G elements (4.3 GB, and as much for the gradient), row 42,690 the
  // one across 2^31. Row r is base row r mod 7, so the reference is 7 rows on the CPU.
  const int64_t rows = 43000, vocab = 50304, kinds = 7;
  const at::Tensor base = on_gpu(pattern({kinds, vocab}, 0.8).mul(4));
  const at::Tensor kind = at::arange(rows, at::dtype(at::kLong).device(kGpu)).remainder(kinds);
  const at::Tensor targets = kind.mul(5).add(11);
  at::Tensor loss, grad;
  {
    const at::Tensor logits = base.index_select(0, kind);
    std::tie(loss, grad) = cuda_kernels::lm_loss(logits, targets, static_cast<double>(rows), true);
  }
  const at::Tensor z = as_reference(base).to(at::kDouble);
  const at::Tensor base_targets = at::arange(kinds, at::kLong).mul(5).add(11);
  const at::Tensor log_p = z.log_softmax(1);
  const at::Tensor row_loss = -log_p.gather(1, base_targets.unsqueeze(1)).squeeze(1);
  const at::Tensor counts = at::bincount(kind.cpu(), {}, kinds).to(at::kDouble);
  const double want_loss = row_loss.mul(counts).sum().item<double>();
  const double loss_error = std::abs(loss.item<double>() - want_loss) / want_loss;
  std::printf(
      "[cuda kernels] LM loss bf16 [43000, 50304]: loss %.6f, reference %.6f, relative "
      "difference %.2e\n",
      loss.item<double>(), want_loss, loss_error);
  EXPECT_LE(loss_error, 1e-4);
  const at::Tensor want_grad = (log_p.exp() - at::one_hot(base_targets, vocab).to(at::kDouble))
                                   .div(static_cast<double>(rows));
  for (const int64_t r : {int64_t{0}, int64_t{42689}, int64_t{42690}, int64_t{42691}, rows - 1}) {
    EXPECT_LE(
        compare("LM loss gradient row " + std::to_string(r), {grad[r]}, {want_grad[r % kinds]}),
        2e-2)
        << r;
    // The same base row before 2^31: the same bits.
    EXPECT_TRUE(at::equal(grad[r], grad[r % kinds])) << r;
  }
}

TEST(CudaKernels, LmLossRowsOfMinusInfinityAndANanRow) {
  SKIP_WITHOUT_OUR_KERNELS();
  const double inf = std::numeric_limits<double>::infinity();
  const int64_t rows = 5, vocab = 300;
  at::Tensor logits = pattern({rows, vocab}, 0.8).mul(4);
  const at::Tensor targets = at::tensor({7, 100, 299, 0, 50}, at::kLong);
  logits[0].fill_(-inf);  // all -inf but the target: loss 0, gradient 0
  logits[0][7] = 2.0;
  logits[1].fill_(-inf);  // all -inf but the target and one more
  logits[1][100] = 1.0;
  logits[1][3] = 1.5;
  logits[3].narrow(0, 0, 299).fill_(-inf);  // the target -inf, the last logit not: loss +inf
  local::VocabSlice slice;
  slice.real = vocab;
  for (const bool nan_row : {false, true}) {
    at::Tensor z = logits.clone();
    if (nan_row) z[2][123] = std::numeric_limits<double>::quiet_NaN();
    for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
      const local::LossChunk got = local::loss_chunk(LossPathId::kKernel, on_gpu(z, dtype),
                                                     targets.to(kGpu), slice, at::kFloat, 5, true);
      const local::LossChunk want = local::loss_chunk(
          LossPathId::kPasses, as_reference(on_gpu(z, dtype)), targets, slice, at::kFloat, 5, true);
      const std::string what = std::string("LM loss, rows of -inf") +
                               (nan_row ? " and a NaN row" : "") + ", " + c10::toString(dtype);
      EXPECT_LE(compare(what, {got.loss, got.grad}, {want.loss, want.grad}), 2e-2) << what;
      EXPECT_TRUE(got.grad[0].eq(0).all().item<bool>()) << what << ": row 0's gradient";
    }
  }
}

TEST(CudaKernels, LmLossTakesViewsAndAPoolStream) {
  SKIP_WITHOUT_OUR_KERNELS();
  const at::Tensor targets = on_gpu(at::arange(12, at::kLong).mul(7), at::kLong);
  const auto run = [&](const Outputs& in) {
    const auto [loss, grad] = cuda_kernels::lm_loss(in[0], targets, 12.0, true);
    return Outputs{loss, grad};
  };
  // [12, 300] logits as the transpose of [300, 12].
  expect_views_and_pool_stream_alike("LM loss", run, {on_gpu(pattern({300, 12}, 0.8).mul(4)).t()});
}

// ---- grouped GEMM -----------------------------------------------------------------------------

/// The ends as the kernels hold them (NOTE [Group ends on the device]): each the largest so far,
/// within [0, rows].
std::vector<int64_t> clamped(const std::vector<int64_t>& ends, int64_t rows) {
  std::vector<int64_t> out;
  int64_t start = 0;
  for (const int64_t end : ends) {
    start = std::min(rows, std::max(start, end));
    out.push_back(start);
  }
  return out;
}

/// Fills the caching allocator's next blocks of these sizes with NaN, so that an output element
/// a kernel leaves unwritten shows.
void poison(const std::vector<std::vector<int64_t>>& shapes, at::ScalarType dtype) {
  for (const std::vector<int64_t>& shape : shapes)
    at::full(shape, std::numeric_limits<double>::quiet_NaN(), at::dtype(dtype).device(kGpu));
}

/// grouped_mm (w transposed and not) and grouped_weight_grads of ours against kReferenceGemm's
/// per-group at::matmul on the GPU in float32 over the ends `want_ends` (the rows after their
/// last: zeros in y, nothing in dw).
double compare_grouped(const std::string& what, const at::Tensor& x, const at::Tensor& ends,
                       const std::vector<int64_t>& want_ends, const std::vector<at::Tensor>& w,
                       const at::Tensor& dy) {
  const int64_t rows = x.size(0), used = want_ends.back();
  const at::Tensor want_ends_t = at::tensor(want_ends, at::kLong);
  std::vector<at::Tensor> w_t, w_float, w_t_float;
  for (const at::Tensor& wg : w) {
    w_t.push_back(wg.t().contiguous());
    w_float.push_back(wg.to(at::kFloat));
    w_t_float.push_back(w_t.back().to(at::kFloat));
  }
  const at::Tensor xf = x.to(at::kFloat).narrow(0, 0, used),
                   dyf = dy.to(at::kFloat).narrow(0, 0, used);
  const auto padded = [&](const at::Tensor& y) {
    return at::cat({y, at::zeros({rows - used, y.size(1)}, y.options())});
  };
  poison({{rows, w[0].size(0)}}, x.scalar_type());
  const at::Tensor y_t = cuda_kernels::grouped_mm(x, ends, w, true);
  poison({{rows, w[0].size(0)}}, x.scalar_type());
  const at::Tensor y = cuda_kernels::grouped_mm(x, ends, w_t, false);
  const at::Tensor dw = cuda_kernels::grouped_weight_grads(dy, x, ends);
  return compare(what, {y_t, y, dw},
                 {padded(kReferenceGemm.mm(xf, want_ends_t, w_float, true)),
                  padded(kReferenceGemm.mm(xf, want_ends_t, w_t_float, false)),
                  kReferenceGemm.weight_grads(dyf, xf, want_ends_t)});
}

TEST(CudaKernels, GroupedGemmAt300GroupsAndDeepRows) {
  SKIP_WITHOUT_OUR_KERNELS();
  // 300 groups (three launches of 128) of {0, 1, 63, 64, 65, 4807} rows in turn (250,000 rows),
  // 1,000 deep (not a multiple of the 32-deep steps), 96 columns (a tile and a half).
  const std::vector<int64_t> sizes{0, 1, 63, 64, 65, 4807};
  std::vector<int64_t> ends;
  int64_t rows = 0;
  for (size_t g = 0; g < 300; ++g) {
    rows += sizes[g % sizes.size()];
    ends.push_back(rows);
  }
  const int64_t depth = 1000, cols = 96;
  for (const at::ScalarType dtype : {at::kBFloat16, at::kHalf, at::kFloat}) {
    const at::Tensor x = on_gpu(pattern({rows, depth}, 0.3), dtype);
    const at::Tensor dy = on_gpu(pattern({rows, cols}, 0.6), dtype);
    std::vector<at::Tensor> w;
    for (size_t g = 0; g < ends.size(); ++g)
      w.push_back(on_gpu(pattern({cols, depth}, 0.01 * static_cast<double>(g)), dtype));
    const double error =
        compare_grouped(std::string("grouped GEMM, 300 groups, K 1000, ") + c10::toString(dtype), x,
                        on_gpu(at::tensor(ends, at::kLong), at::kLong), ends, w, dy);
    EXPECT_LE(error, dtype == at::kFloat ? 1e-4 : 1e-2) << c10::toString(dtype);
  }
}

TEST(CudaKernels, GroupedGemmHoldsGroupEndsWithinTheRows) {
  SKIP_WITHOUT_OUR_KERNELS();
  const int64_t rows = 200, depth = 40, cols = 24;
  const at::Tensor x = on_gpu(pattern({rows, depth}, 0.3), at::kFloat);
  const at::Tensor dy = on_gpu(pattern({rows, cols}, 0.6), at::kFloat);
  std::vector<at::Tensor> w;
  for (int g = 0; g < 3; ++g)
    w.push_back(on_gpu(pattern({cols, depth}, 0.2 * g), at::kFloat));
  // M - 1 (the last row in no group: zeros), M + 1, decreasing, all past M.
  for (const std::vector<int64_t>& ends : std::vector<std::vector<int64_t>>{
           {50, 120, 199}, {50, 120, 201}, {50, 30, 200}, {250, 260, 300}, {50, 120, 200}}) {
    const std::string what = "grouped GEMM, ends {" + std::to_string(ends[0]) + ", " +
                             std::to_string(ends[1]) + ", " + std::to_string(ends[2]) +
                             "} for 200 rows";
    EXPECT_LE(compare_grouped(what, x, on_gpu(at::tensor(ends, at::kLong), at::kLong),
                              clamped(ends, rows), w, dy),
              1e-5)
        << what;
  }
}

TEST(CudaKernels, GroupedGemmTakesViewsAndAPoolStream) {
  SKIP_WITHOUT_OUR_KERNELS();
  const at::Tensor ends = on_gpu(at::tensor({30, 30, 70}, at::kLong), at::kLong);
  const auto run = [&](const Outputs& in) {
    const std::vector<at::Tensor> w(in.begin() + 2, in.end());
    return Outputs{cuda_kernels::grouped_mm(in[0], ends, w, true),
                   cuda_kernels::grouped_weight_grads(in[1], in[0], ends)};
  };
  // x [70, 40] and dy [70, 24] as transposes, each weight [24, 40] as the transpose of [40, 24].
  Outputs views{on_gpu(pattern({40, 70}, 0.3)).t(), on_gpu(pattern({24, 70}, 0.6)).t()};
  for (int g = 0; g < 3; ++g)
    views.push_back(on_gpu(pattern({40, 24}, 0.2 * g)).t());
  expect_views_and_pool_stream_alike("grouped GEMM", run, views);
}

}  // namespace
}  // namespace vescale::kernels
