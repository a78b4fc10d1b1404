#include "core/blas.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

namespace vescale::blas {
namespace {

// CBLAS's enums (cblas.h), fixed by the standard interface.
constexpr int kRowMajor = 101;
constexpr int kNoTrans = 111;
constexpr int kTrans = 112;

using Sgemm = void (*)(int order, int trans_a, int trans_b, int m, int n, int k, float alpha,
                       const float* a, int lda, const float* b, int ldb, float beta, float* c,
                       int ldc);

Sgemm sgemm() {
  static const Sgemm found = reinterpret_cast<Sgemm>(::dlsym(RTLD_DEFAULT, "cblas_sgemm"));
  return found;
}

/// How the BLAS reads the [rows, cols] matrices of a tensor: row-major (unit column stride) or
/// transposed (unit row stride), with the leading dimension. `ok` is false for other layouts.
struct Layout {
  bool ok = false;
  int trans = kNoTrans;
  int ld = 0;
};

constexpr int64_t kMaxInt = std::numeric_limits<int>::max();

Layout layout(const at::Tensor& x) {
  const int64_t rows = x.size(-2), cols = x.size(-1);
  const int64_t row_stride = x.stride(-2), col_stride = x.stride(-1);
  if (col_stride == 1 && row_stride >= std::max<int64_t>(1, cols) && row_stride <= kMaxInt)
    return {true, kNoTrans, static_cast<int>(row_stride)};
  if (row_stride == 1 && col_stride >= std::max<int64_t>(1, rows) && col_stride <= kMaxInt)
    return {true, kTrans, static_cast<int>(col_stride)};
  return {};
}

/// Whether cblas_sgemm can take these operands as they are: float32 CPU tensors, not empty,
/// sizes that fit an int, and layouts `la`, `lb`, `lc` it reads (`out` row-major).
bool direct(const at::Tensor& out, const at::Tensor& a, const at::Tensor& b, const Layout& la,
            const Layout& lb, const Layout& lc) {
  for (const at::Tensor* x : {&out, &a, &b})
    if (x->scalar_type() != at::kFloat || !x->device().is_cpu() || x->numel() == 0) return false;
  if (a.size(-2) > kMaxInt || a.size(-1) > kMaxInt || b.size(-1) > kMaxInt) return false;
  return sgemm() != nullptr && la.ok && lb.ok && lc.ok && lc.trans == kNoTrans;
}

}  // namespace

bool has_direct_sgemm() {
  return sgemm() != nullptr;
}

void matmul_into(const at::Tensor& out, const at::Tensor& a, const at::Tensor& b, double alpha,
                 double beta) {
  TORCH_CHECK(beta == 0.0 || beta == 1.0, "matmul_into: beta must be 0 or 1, not ", beta);
  TORCH_CHECK(
      a.dim() >= 2 && a.dim() == b.dim() && a.dim() == out.dim() && a.size(-1) == b.size(-2) &&
          out.size(-2) == a.size(-2) && out.size(-1) == b.size(-1),
      "matmul_into: shapes ", a.sizes(), " @ ", b.sizes(), " -> ", out.sizes(), " do not fit");
  for (int64_t d = 0; d + 2 < a.dim(); ++d)
    TORCH_CHECK(a.size(d) == b.size(d) && a.size(d) == out.size(d),
                "matmul_into: batch sizes differ: ", a.sizes(), ", ", b.sizes(), ", ", out.sizes());
  TORCH_CHECK(!c10::GradMode::is_enabled() ||
                  !(a.requires_grad() || b.requires_grad() || out.requires_grad()),
              "matmul_into records no autograd history; call it with grad mode off");
  const Layout la = layout(a), lb = layout(b), lc = layout(out);
  if (!direct(out, a, b, la, lb, lc)) {
    at::Tensor product = at::matmul(a, b);
    if (alpha != 1.0) product.mul_(alpha);
    if (beta == 0.0)
      out.copy_(product);
    else
      out.add_(product);
    return;
  }
  const int m = static_cast<int>(a.size(-2)), k = static_cast<int>(a.size(-1));
  const int p = static_cast<int>(b.size(-1));
  const int64_t batch_dims = a.dim() - 2;
  int64_t batches = 1;
  for (int64_t d = 0; d < batch_dims; ++d)
    batches *= a.size(d);
  const float* a_ptr = a.data_ptr<float>();
  const float* b_ptr = b.data_ptr<float>();
  float* c_ptr = out.data_ptr<float>();
  for (int64_t i = 0; i < batches; ++i) {
    // The offsets of batch element i in each tensor (row-major order over the batch dims).
    int64_t rest = i, off_a = 0, off_b = 0, off_c = 0;
    for (int64_t d = batch_dims - 1; d >= 0; --d) {
      const int64_t index = rest % a.size(d);
      rest /= a.size(d);
      off_a += index * a.stride(d);
      off_b += index * b.stride(d);
      off_c += index * out.stride(d);
    }
    sgemm()(kRowMajor, la.trans, lb.trans, m, p, k, static_cast<float>(alpha), a_ptr + off_a, la.ld,
            b_ptr + off_b, lb.ld, static_cast<float>(beta), c_ptr + off_c, lc.ld);
  }
}

}  // namespace vescale::blas
