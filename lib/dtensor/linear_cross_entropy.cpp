#include "dtensor/linear_cross_entropy.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <limits>

#include "core/autograd_node.h"
#include "core/error.h"
#include "core/ignore_target.h"
#include "kernels/cuda_kernels.h"

namespace vescale::local {
namespace {

using torch::autograd::variable_list;

// NOTE [Fused LM loss]
// The LM head (logits = x w^T over the padded vocabulary) and the mean cross entropy against the
// next tokens, taken together so that no [rows, vocab] tensor outlives a chunk of rows. Unfused,
// a step keeps the head's logits and their float32 log-softmax for the backward: at GPT-2's
// vocabulary of 50,304 and 16K tokens, 3.3 GB in float32, more than all the blocks keep. Here,
// for each chunk of rows [s, e) (its float32 logits within chunk_budget: 64 MiB on the CPU,
// 512 MiB on a GPU):
//   logits = x[s:e] w_real^T                       in the compute dtype
//   loss  += sum(lse - logits[target])             lse and the loss in float32 (float64 stays)
//   g      = (softmax(logits) - onehot(target)) / N, cast to the compute dtype
//   dx[s:e] = g w_real;  dw_real += g^T x[s:e]     (a float32 accumulator for lower precision)
// so the gradients are made with the loss: the head's three GEMMs are the unfused ones, and the
// backward only scales dx and dw by the loss's gradient (1, or 1/micro-batches under a
// pipeline). What stays for the backward is dx [rows, C] and dw [V, C]; the forward's time in
// the step's anatomy now holds the head's backward GEMMs. Without grad mode or a differentiable
// input the chunks skip the gradients (evaluation).
// - Three rows of the kernel table (NOTE [Kernel table]) turn a chunk's logits into its loss
//   and gradient, chosen from the device, the dtype and whether the vocabulary is split. With the
//   whole vocabulary on a CUDA rank: ATen's log-softmax and its backward, two kernels a chunk
//   plus the zeros with -1/N at the targets the backward takes, ~24 bytes of memory traffic per
//   float32 logit where the unfused cast, log-softmax, NLL and their backwards take ~46; bf16 and
//   float16 logits are widened to float32 first by an explicit cast (the "widened" row). Never
//   ATen's half_to_float flag: CUDA's kernel converts float16 only, and bf16 with it failed at
//   the first step on an H100 (issue [31]); the CPU has no such mode at all, so no CPU test could
//   run that call. Elsewhere, pass by pass (max, subtract, exp, sum, divide, scatter the -1,
//   scale) in place over one float32 copy: on the CPU, at 333 x 50,304 float32 logits, 73 ms on
//   one thread where log-softmax, its backward and the zeros take 153 (they allocate and fault
//   in two more [rows, vocab] tensors). No row asks which device it runs on: the table picks
//   the row, and a row makes the same ATen calls on every device, so the CPU tests of each row
//   (tests/dtensor/linear_cross_entropy_test, the device faked in the table's context) run what
//   CUDA runs. A CUDA row waits for a GPU run before it is taken (NOTE [GPU-verified]): until
//   the widened row has one, bf16 on CUDA goes pass by pass.
// - Ahead of them, our own kernel (lib/kernels/cuda/lm_loss.cu, NOTE [CUDA kernels]) for a
//   whole vocabulary on CUDA in float32, bf16 or float16: a block a row reads the row once for
//   its max and sum of exponentials together (online softmax) and once more to write the
//   gradient in the logits' type, so no float32 [rows, vocab] tensor is made at all. Its CPU
//   reference is the pass-by-pass row (tests/kernels/kernel_table_test runs both on a GPU).
// - Padding: only the weight's first `real` rows are classes; the padded ones take no part (the
//   unfused head adds a -inf mask to them, whose exp is 0) and get a zero gradient.
// - Vocab-parallel: each chunk's row maxima all-reduce (max) over the groups the vocabulary is
//   split over, then its sums of exponentials and target logits (sum, one packed all-reduce), so
//   every rank has each row's whole log-sum-exp; dx is this slice's part, which the DTensor op
//   sums over those groups in the backward (x is Replicate there). A rank whose slice is only
//   padding takes part in the all-reduces with -inf and 0.
// - float64 matches the unfused loss to rounding (the tests: 1e-12 on every layout).

/// The gradients the forward computed, scaled by the loss's gradient.
struct LinearCrossEntropyBackward : torch::autograd::Node {
  at::Tensor dx, dw;

  std::string name() const override { return "LinearCrossEntropyBackward"; }
  void release_variables() override {
    dx.reset();
    dw.reset();
  }
  variable_list apply(variable_list&& grads) override {
    TORCH_CHECK(dx.defined(), "[loss] backward a second time without retain_graph");
    if (!grads[0].defined()) return {at::Tensor(), at::Tensor()};
    return {dx * grads[0], dw * grads[0]};
  }
};

/// The whole vocabulary on this rank: log-softmax in one kernel and its backward in another, on
/// float32 or float64 logits (bf16 and float16 ones widened to float32 first: NOTE [Fused LM
/// loss]).
LossChunk log_softmax_chunk(const at::Tensor& logits, const at::Tensor& t, double n_global,
                            bool grad) {
  const at::Tensor in =
      kernels::is_half_or_bf16(logits.scalar_type()) ? logits.to(at::kFloat) : logits;
  const at::Tensor logp = at::_log_softmax(in, 1, /*half_to_float=*/false);
  LossChunk c{logp.gather(1, t.unsqueeze(1)).sum().neg(), at::Tensor()};
  if (!grad) return c;
  // d loss / d logp is -1/N at each row's target; log-softmax's backward turns that into
  // (softmax - onehot) / N.
  at::Tensor d = at::zeros_like(logp);
  d.scatter_(1, t.unsqueeze(1), -1.0 / n_global);
  c.grad = at::_log_softmax_backward_data(d, logp, 1, in.scalar_type());
  if (c.grad.scalar_type() != logits.scalar_type()) c.grad = c.grad.to(logits.scalar_type());
  return c;
}

/// Pass by pass in `acc`: each row's max, then its sum of exponentials and target logit (each
/// all-reduced over `vocab.groups` when the vocabulary is split), then the gradient in place.
/// `masked`: rows whose target is kIgnoreTarget count nothing (NOTE [Loss masks]).
LossChunk passes_chunk(const at::Tensor& logits, const at::Tensor& t, const VocabSlice& vocab,
                       at::ScalarType acc, double n_global, bool grad, bool masked) {
  const int64_t r = logits.size(0), v = logits.size(1);
  at::Tensor z = logits.scalar_type() == acc ? logits : logits.to(acc);
  const double inf = std::numeric_limits<double>::infinity();
  at::Tensor max = v > 0 ? std::get<0>(z.max(1)) : at::full({r}, -inf, z.options());
  for (const comm::Group* g : vocab.groups)
    g->all_reduce(max, comm::ReduceOp::kMax);
  z.sub_(max.unsqueeze(1));
  const at::Tensor mine = (t >= vocab.offset) & (t < vocab.offset + v);
  const at::Tensor column = (t - vocab.offset).clamp(0, std::max<int64_t>(v - 1, 0));
  at::Tensor target = v > 0 ? at::where(mine, z.gather(1, column.unsqueeze(1)).squeeze(1),
                                        at::zeros({}, z.options()))
                            : at::zeros({r}, z.options());
  z.exp_();
  at::Tensor packed = at::stack({z.sum(1), target});  // one all-reduce for both
  for (const comm::Group* g : vocab.groups)
    g->all_reduce(packed, comm::ReduceOp::kSum);
  const at::Tensor sum_exp = packed[0];
  const at::Tensor trained = masked ? (t != kIgnoreTarget).to(acc) : at::Tensor();
  LossChunk c{
      masked ? ((sum_exp.log() - packed[1]) * trained).sum() : (sum_exp.log() - packed[1]).sum(),
      at::Tensor()};
  if (!grad) return c;
  // z becomes the logits' gradient: softmax, less 1 at the target, over N (0 on a masked row).
  z.div_(sum_exp.unsqueeze(1));
  if (v > 0) z.scatter_add_(1, column.unsqueeze(1), mine.to(acc).neg().unsqueeze(1));
  if (masked) z.mul_(trained.unsqueeze(1));
  z.mul_(1.0 / n_global);
  c.grad = z.scalar_type() == logits.scalar_type() ? z : z.to(logits.scalar_type());
  return c;
}

}  // namespace

LossChunk loss_chunk(kernels::LossPathId path, const at::Tensor& logits, const at::Tensor& targets,
                     const VocabSlice& vocab, at::ScalarType acc, double n_global, bool grad,
                     bool masked) {
  if (path == kernels::LossPathId::kPasses)
    return passes_chunk(logits, targets, vocab, acc, n_global, grad, masked);
  VS_CHECK(vocab.groups.empty(),
           "[loss] the log-softmax rows and the kernel need the whole vocabulary on the rank");
  VS_CHECK(!masked, "[loss] masked targets go pass by pass (NOTE [Loss masks])");
  if (path == kernels::LossPathId::kKernel) {
    auto [loss, gradient] = cuda_kernels::lm_loss(logits, targets, n_global, grad);
    return {loss, gradient};
  }
  return log_softmax_chunk(logits, targets, n_global, grad);
}

kernels::LossPathId loss_path_for(const at::Tensor& x, const VocabSlice& vocab, bool masked) {
  kernels::KernelContext context{x.device(), x.scalar_type()};
  context.vocab_split = !vocab.groups.empty();
  context.masked_targets = masked;
  return kernels::take(kernels::kLossPaths, context).id;
}

int64_t chunk_rows_for(int64_t rows, int64_t columns, int64_t budget) {
  const int64_t per_row = std::max<int64_t>(1, columns) * static_cast<int64_t>(sizeof(float));
  return std::clamp<int64_t>(budget / per_row, 1, std::max<int64_t>(1, rows));
}

int64_t chunk_budget(const at::Tensor& x) {
  return (x.is_cuda() ? int64_t{512} : int64_t{64}) << 20;
}

at::Tensor linear_cross_entropy(const at::Tensor& x, const at::Tensor& w, const at::Tensor& t,
                                const VocabSlice& vocab, double n_global, int64_t chunk_rows,
                                std::optional<kernels::LossPathId> path, bool masked) {
  VS_CHECK(x.dim() == 2 && w.dim() == 2 && t.dim() == 1 && x.size(1) == w.size(1) &&
               t.size(0) == x.size(0) && 0 <= vocab.real && vocab.real <= w.size(0),
           "[loss] linear_cross_entropy: x [{}, {}], w [{}, {}], targets [{}], {} real rows",
           x.size(0), x.size(1), w.size(0), w.size(1), t.size(0), vocab.real);
  const bool track =
      torch::autograd::GradMode::is_enabled() && (x.requires_grad() || w.requires_grad());
  const at::ScalarType compute = x.scalar_type();
  const at::ScalarType acc = kernels::is_half_or_bf16(compute) ? at::kFloat : compute;
  const int64_t n = x.size(0), v = vocab.real;
  if (chunk_rows <= 0) chunk_rows = chunk_rows_for(n, v, chunk_budget(x));
  const kernels::LossPathId row = path ? *path : loss_path_for(x, vocab, masked);

  NodePtr<LinearCrossEntropyBackward> node;
  at::Tensor loss = at::zeros({}, x.options().dtype(acc));
  {
    const torch::autograd::AutoGradMode no_grad(false);
    const at::Tensor xd = x.detach().contiguous();
    const at::Tensor w_real = w.detach().narrow(0, 0, v);
    const at::Tensor targets = t.detach();
    at::Tensor dx, dw;
    if (track) {
      dx = at::empty_like(xd);
      dw = at::zeros({w.size(0), w.size(1)}, w.options().dtype(acc));
    }
    for (int64_t s = 0; s < n; s += chunk_rows) {
      const int64_t e = std::min(n, s + chunk_rows);
      const at::Tensor xc = xd.slice(0, s, e);
      const at::Tensor logits = at::mm(xc, w_real.t());
      const LossChunk c =
          loss_chunk(row, logits, targets.slice(0, s, e), vocab, acc, n_global, track, masked);
      loss.add_(c.loss);
      if (!track) continue;
      at::Tensor dx_rows = dx.slice(0, s, e);
      at::mm_out(dx_rows, c.grad, w_real);
      if (v == 0) continue;
      at::Tensor dw_real = dw.narrow(0, 0, v);
      if (acc == compute) {
        dw_real.addmm_(c.grad.t(), xc);
      } else {
        dw_real.add_(at::mm(c.grad.t(), xc));
      }
    }
    loss.div_(n_global);
    if (track) {
      node = make_node<LinearCrossEntropyBackward>();
      node->dx = std::move(dx);
      node->dw = dw.scalar_type() == w.scalar_type() ? dw : dw.to(w.scalar_type());
    }
  }
  if (!track) return loss;
  node->set_next_edges(torch::autograd::collect_next_edges(x, w));
  torch::autograd::set_history(loss, node);
  return loss;
}

}  // namespace vescale::local
