#include "kernels/adamw_update.h"

#include <ATen/ATen.h>

#include <cmath>

namespace vescale::local {

void adamw_step(const AdamWLists& l, const AdamWHyper& h) {
  const double bias1 = 1.0 - std::pow(h.beta1, static_cast<double>(h.step));
  const double bias2 = 1.0 - std::pow(h.beta2, static_cast<double>(h.step));
  if (h.weight_decay != 0) at::_foreach_mul_(l.params, 1.0 - h.lr * h.weight_decay);
  at::_foreach_mul_(l.exp_avgs, h.beta1);
  at::_foreach_add_(l.exp_avgs, l.grads, 1.0 - h.beta1);
  at::_foreach_mul_(l.exp_avg_sqs, h.beta2);
  at::_foreach_addcmul_(l.exp_avg_sqs, l.grads, l.grads, 1.0 - h.beta2);
  std::vector<at::Tensor> denoms = at::_foreach_sqrt(l.exp_avg_sqs);
  at::_foreach_div_(denoms, std::sqrt(bias2));
  at::_foreach_add_(denoms, h.eps);
  at::_foreach_addcdiv_(l.params, l.exp_avgs, denoms, -h.lr / bias1);
}

}  // namespace vescale::local
