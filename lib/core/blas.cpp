#include "core/blas.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <dlfcn.h>

#include <cstdint>
#include <limits>

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

/// How the BLAS reads one [rows, cols] matrix of a 3-D tensor: row-major (unit column stride)
/// or transposed (unit row stride), with its leading dimension; nullopt-like `ok = false` for any
/// other layout.
struct Operand {
  bool ok = false;
  int trans = kNoTrans;
  int64_t ld = 0;
};

Operand operand(const at::Tensor& x) {
  const int64_t rows = x.size(1), cols = x.size(2);
  const int64_t row_stride = x.stride(1), col_stride = x.stride(2);
  if (col_stride == 1 && row_stride >= std::max<int64_t>(1, cols))
    return {true, kNoTrans, row_stride};
  if (row_stride == 1 && col_stride >= std::max<int64_t>(1, rows))
    return {true, kTrans, col_stride};
  return {};
}

bool fits_int(int64_t v) {
  return v <= std::numeric_limits<int>::max();
}

}  // namespace

bool has_direct_sgemm() {
  return sgemm() != nullptr;
}

at::Tensor bmm(const at::Tensor& a, const at::Tensor& b, double alpha) {
  const bool direct = sgemm() != nullptr && a.scalar_type() == at::kFloat &&
                      b.scalar_type() == at::kFloat && a.device().is_cpu() && b.device().is_cpu() &&
                      !(c10::GradMode::is_enabled() && (a.requires_grad() || b.requires_grad())) &&
                      a.dim() == 3 && b.dim() == 3 && a.size(0) == b.size(0) &&
                      a.size(2) == b.size(1);
  const Operand oa = direct ? operand(a) : Operand{}, ob = direct ? operand(b) : Operand{};
  const int64_t n = direct ? a.size(0) : 0, m = direct ? a.size(1) : 0;
  const int64_t k = direct ? a.size(2) : 0, p = direct ? b.size(2) : 0;
  if (!oa.ok || !ob.ok || !fits_int(m) || !fits_int(k) || !fits_int(p) || !fits_int(oa.ld) ||
      !fits_int(ob.ld) || m == 0 || p == 0 || k == 0) {
    at::Tensor out = at::bmm(a, b);
    return alpha == 1.0 ? out : out.mul_(alpha);
  }
  at::Tensor c = at::empty({n, m, p}, a.options());
  const float* a_ptr = a.data_ptr<float>();
  const float* b_ptr = b.data_ptr<float>();
  float* c_ptr = c.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i)
    sgemm()(kRowMajor, oa.trans, ob.trans, static_cast<int>(m), static_cast<int>(p),
            static_cast<int>(k), static_cast<float>(alpha), a_ptr + i * a.stride(0),
            static_cast<int>(oa.ld), b_ptr + i * b.stride(0), static_cast<int>(ob.ld), 0.0f,
            c_ptr + i * m * p, static_cast<int>(p));
  return c;
}

}  // namespace vescale::blas
