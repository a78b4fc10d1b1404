#include "support/expect_close.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

namespace vescale::testing {

double max_relative_error(const at::Tensor& actual, const at::Tensor& reference, double floor) {
  if (reference.numel() == 0) return 0;
  at::Tensor a = actual.detach().to(at::kDouble);
  at::Tensor b = reference.detach().to(at::kDouble);
  return ((a - b).abs() / b.abs().clamp_min(floor)).max().item<double>();
}

double expect_close(const at::Tensor& actual, const at::Tensor& reference, double rtol, double atol,
                    const std::string& label) {
  if (actual.sizes() != reference.sizes()) {
    ADD_FAILURE() << label << ": shape [" << fmt::format("{}", fmt::join(actual.sizes(), ", "))
                  << "] vs reference [" << fmt::format("{}", fmt::join(reference.sizes(), ", "))
                  << "]";
    return INFINITY;
  }
  at::Tensor a = actual.detach().to(at::kDouble).reshape({-1});
  at::Tensor b = reference.detach().to(at::kDouble).reshape({-1});
  at::Tensor bad = ((a - b).abs() > atol + rtol * b.abs()).nonzero().reshape({-1});
  if (bad.numel() > 0) {
    std::string first;
    for (int64_t k = 0; k < std::min<int64_t>(bad.numel(), 5); ++k) {
      const int64_t i = bad[k].item<int64_t>();
      first +=
          fmt::format("\n  [{}] {:.17g} vs {:.17g}", i, a[i].item<double>(), b[i].item<double>());
    }
    ADD_FAILURE() << label << ": " << bad.numel() << " of " << a.numel()
                  << " elements differ (rtol " << rtol << ", atol " << atol << "):" << first;
  }
  return max_relative_error(actual, reference);
}

}  // namespace vescale::testing
