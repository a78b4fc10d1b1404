#include "kernels/adamw_update.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

namespace vescale::local {
namespace {

/// The update of one parameter's elements (any shape; all four alike); `denom` receives
/// sqrt(v) and may be undefined (then it is allocated).
void update(at::Tensor p, const at::Tensor& g, at::Tensor m, at::Tensor v, at::Tensor denom,
            const AdamWHyper& h, double bias1, double bias2) {
  if (h.weight_decay != 0) p.mul_(1.0 - h.lr * h.weight_decay);
  m.mul_(h.beta1).add_(g, 1.0 - h.beta1);
  v.mul_(h.beta2).addcmul_(g, g, 1.0 - h.beta2);
  if (denom.defined()) {
    at::sqrt_out(denom, v);
  } else {
    denom = v.sqrt();
  }
  denom.div_(std::sqrt(bias2)).add_(h.eps);
  p.addcdiv_(m, denom, -h.lr / bias1);
}

bool all_contiguous(const AdamWLists& l, size_t i) {
  return l.params[i].is_contiguous() && l.grads[i].is_contiguous() &&
         l.exp_avgs[i].is_contiguous() && l.exp_avg_sqs[i].is_contiguous();
}

}  // namespace

void adamw_step(const AdamWLists& l, const AdamWHyper& h) {
  const double bias1 = 1.0 - std::pow(h.beta1, static_cast<double>(h.step));
  const double bias2 = 1.0 - std::pow(h.beta2, static_cast<double>(h.step));
  for (size_t i = 0; i < l.params.size(); ++i) {
    if (!l.scratch.defined() || !all_contiguous(l, i)) {
      update(l.params[i], l.grads[i], l.exp_avgs[i], l.exp_avg_sqs[i], at::Tensor(), h, bias1,
             bias2);
      continue;
    }
    const at::Tensor p = l.params[i].view({-1}), g = l.grads[i].view({-1}),
                     m = l.exp_avgs[i].view({-1}), v = l.exp_avg_sqs[i].view({-1});
    const int64_t n = p.numel(), chunk = l.scratch.numel();
    for (int64_t start = 0; start < n; start += chunk) {
      const int64_t len = std::min(chunk, n - start);
      update(p.narrow(0, start, len), g.narrow(0, start, len), m.narrow(0, start, len),
             v.narrow(0, start, len), l.scratch.narrow(0, 0, len), h, bias1, bias2);
    }
  }
}

}  // namespace vescale::local
