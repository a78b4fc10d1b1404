// NOTE [Fast paths]: the one place that calls LibTorch 2.x kernels. The `#if` blocks below are
// NOT COMPILED on this project's build machine (Debian's CPU LibTorch 1.13): they are written
// against the official LibTorch 2.x signatures (native_functions.yaml):
//   scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_mask=None,
//       float dropout_p=0.0, bool is_causal=False, *, float? scale=None) -> Tensor
//   _fused_adamw_(Tensor(a!)[] self, Tensor(b!)[] grads, Tensor(c!)[] exp_avgs,
//       Tensor(d!)[] exp_avg_sqs, Tensor(e!)[] max_exp_avg_sqs, Tensor[] state_steps, *,
//       float lr, float beta1, float beta2, float weight_decay, float eps, bool amsgrad,
//       bool maximize, Tensor? grad_scale=None, Tensor? found_inf=None) -> ()
#include "kernels/fused.h"

#include <ATen/ATen.h>

#include "core/error.h"
#include "core/version_guards.h"

namespace vescale::fused {

at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
#if VESCALE_HAS_FUSED_ATTENTION
  // LibTorch 2.x only: not compiled on the CPU build machine. The default scale is
  // 1/sqrt(q.size(-1)), as the explicit path's; dropout_p 0 as the explicit path applies none.
  return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0,
                                          /*is_causal=*/true);
#else
  (void)q;
  (void)k;
  (void)v;
  throw Error("[dtensor] fused attention needs LibTorch 2.0; this build has " TORCH_VERSION);
#endif
}

bool adamw_takes(const std::vector<at::Tensor>& tensors) {
  const at::Tensor& p = tensors.front();
  if (p.numel() == 0) return false;
  for (const at::Tensor& t : tensors) {
    if (!t.is_contiguous() || t.scalar_type() != p.scalar_type() || t.device() != p.device())
      return false;
  }
  return true;
}

void adamw_step(const AdamWLists& lists, const AdamWHyper& hyper) {
  if (lists.params.empty()) return;
#if VESCALE_HAS_FUSED_ADAMW
  // LibTorch 2.1+ only: not compiled on the CPU build machine. The kernel reads each tensor's
  // step from a float32 tensor on its device (and does not advance it); all share one.
  const at::Tensor step =
      at::scalar_tensor(static_cast<double>(hyper.step),
                        at::TensorOptions(at::kFloat).device(lists.params.front().device()));
  const std::vector<at::Tensor> steps(lists.params.size(), step);
  at::_fused_adamw_(lists.params, lists.grads, lists.exp_avgs, lists.exp_avg_sqs,
                    /*max_exp_avg_sqs=*/{}, steps, hyper.lr, hyper.beta1, hyper.beta2,
                    hyper.weight_decay, hyper.eps, /*amsgrad=*/false, /*maximize=*/false);
#else
  (void)hyper;
  throw Error("[optim] fused AdamW needs LibTorch 2.1; this build has " TORCH_VERSION);
#endif
}

}  // namespace vescale::fused
