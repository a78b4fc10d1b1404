#include "autoplan/compute_time.h"

#include <algorithm>

namespace vescale::autoplan {
namespace {

/// A block's forward + backward of one micro-batch, analytically: its parameter matmuls at the
/// rate of the MLP's first matmul, its attention matmuls (12 C T per token, MFU's count) at the
/// rate of one T x T x C/heads matmul (under context parallelism, of one chunk's: T / 2cp), and
/// its elementwise work (per token, forward: layer norms, residual adds and the attention output
/// on C, or C/tp with sp; GELU on 4C/tp; the scaled, masked softmax on heads/tp x T scores;
/// backward twice that) at the bandwidth; a rank's tokens are T / cp of each sequence.
double analytic_block(const ComputeFacts& f, double size, double b, double t, double c,
                      double heads, double block_parameters, double tp, bool sp, double cp = 1) {
  const double tokens = b * t / cp;
  const double chunk = cp > 1 ? t / (2.0 * cp) : t;
  const double param_flops = 6.0 * block_parameters * tokens / tp;
  const double attention_flops = 12.0 * c * t * tokens / tp;
  const double elems =
      3.0 * tokens * (14.0 * (sp ? c / tp : c) + 12.0 * c / tp + 8.0 * heads / tp * t);
  return param_flops / f.gemm_rate(2.0 * tokens * c * 4.0 * c / tp) +
         attention_flops / f.gemm_rate(2.0 * chunk * chunk * c / heads) +
         elems * size / f.stream_bytes_per_s;
}

/// What recompute adds to a block's forward + backward, as a share of it: full reruns the
/// forward (a third), twice under a zero-bubble schedule (its I and W halves each rerun it);
/// selective reruns the attention core's forward (4 C T of the block's 6 P + 12 C T FLOPs per
/// token); averaged over the blocks, every activation_checkpoint_every-th of which recomputes.
double recompute_share(const Shape& s) {
  const JobConfig& c = s.c;
  if (c.activation_checkpoint == Recompute::kSelective)
    return 4.0 * s.C * s.t / (6.0 * s.model.block_parameters + 12.0 * s.C * s.t) *
           c.recomputed_share();
  const bool zero_bubble =
      c.pp > 1 && (c.pp_schedule == PpSchedule::kZbv || c.pp_schedule == PpSchedule::kZbH1);
  return (zero_bubble ? 2.0 : 1.0) / 3.0 * c.recomputed_share();
}

}  // namespace

StageTimes stage_times(const Shape& s, const MachineFacts& facts) {
  const ComputeFacts& f = facts.compute;
  // The analytic time leaves out copies, autograd and what the counts miss: the calibration's
  // block at kBlockProbe's size measures how much, and its ratio scales every block. The
  // framework's own time per block and for the rest was measured at this tp degree under this
  // plan, with the latency of tp's collectives in it.
  const FrameworkTime framework = facts.framework(s.c.tp, s.sp);
  const GptProbe& probe = kBlockProbe;
  const double probe_c = probe.n_embd;
  const double probe_analytic =
      analytic_block(f, s.size, probe.batch, probe.seq_len, probe_c, probe.n_head,
                     12.0 * probe_c * probe_c + 13.0 * probe_c, 1.0, false);
  const double measured_over_analytic =
      std::max(1.0, (f.block_probe_s - f.block_overhead_s) / probe_analytic);
  // The ring's own ops: a rank's 2 cp + 1 blocks (3 with its own keys, 2 with each other
  // rank's), ~8 ops each (scores, mask, max, exp, sum, matmul, merge), forward and twice back.
  const double ring_s = s.cp > 1 ? 3.0 * (2.0 * s.cp + 1.0) * 8.0 * f.op_overhead_s : 0.0;
  const double block_s =
      (measured_over_analytic * analytic_block(f, s.size, s.b, s.t, s.C, s.heads,
                                               s.model.block_parameters, s.tp, s.sp, s.cp) +
       framework.block_s + ring_s) *
      (1.0 + recompute_share(s));
  const double gemm_rate = f.gemm_rate(2.0 * s.tokens * s.C * 4.0 * s.C / s.tp);
  const PipelinePlan& pipe = s.lm.pipe;
  StageTimes out{std::vector<double>(pipe.stages.size(), 0.0),
                 std::vector<double>(pipe.stages.size(), 0.0)};
  for (size_t k = 0; k < pipe.stages.size(); ++k) {
    for (int i = pipe.stages[k].begin; i < pipe.stages[k].end; ++i) {
      const Layer& layer = s.lm.layers[i];
      const bool block = layer.kind == LayerKind::kBlock;
      double seconds = block ? block_s : layer.flops_per_sample * s.b / s.tp / gemm_rate;
      if (block) {
        out.blocks[k] += 1;
      } else if (layer.kind == LayerKind::kHead) {
        // Cross entropy over the vocabulary shard: ~6 passes over the logits, forward and back.
        seconds += 6.0 * s.tokens * s.vocab / s.tp * s.size / f.stream_bytes_per_s;
        seconds += framework.model_s / 2.0;
      } else {
        seconds += 3.0 * 2.0 * s.tokens * s.C * s.size / f.stream_bytes_per_s;
        seconds += framework.model_s / 2.0;
      }
      out.seconds[k] += seconds;
    }
  }
  return out;
}

/// The optimizer: elementwise passes over the busiest rank's state (AdamW reads parameter,
/// gradient and two moments and writes three: 7 passes, plus the clip's one over the gradients).
double optimizer_time(const Shape& s, const StateMemory& mine, const ComputeFacts& f) {
  const JobConfig& c = s.c;
  // ZeRO 1-3 update each parameter's share over its replicas (dp x cp; an expert's dp x cp / ep).
  const double update_elems = mine.updated_elements;
  const double n_tensors = 12.0 * static_cast<double>(s.model.n_layer) / c.pp + 4.0;
  return 8.0 * update_elems * bytes_of(state_dtype(c)) / f.stream_bytes_per_s +
         12.0 * n_tensors * f.op_overhead_s;
}

}  // namespace vescale::autoplan
