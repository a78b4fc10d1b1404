#include "autoplan/cost_model.h"

#include <algorithm>

#include "autoplan/compute_time.h"
#include "autoplan/muon_cost.h"
#include "autoplan/step_shape.h"
#include "config/memory_estimate.h"
#include "parallel/pipeline/schedule.h"

namespace vescale::autoplan {

// NOTE [Plan auto]
// `plan auto` enumerates every layout of N ranks (layout.h), predicts each one's step time and
// memory per rank, drops what does not fit and ranks the rest. Nothing in the prediction is a
// tuned constant: the machine enters only through facts measured while N ranks run at once
// (machine_facts.h: the matmul rate by size, one small op's cost, the elementwise bandwidth,
// the framework's own time per GPT block at each tp degree and plan, one real block's time,
// latency and bandwidth per collective and group size), the model only through analytic counts.
// For the rank with the busiest pipeline stage, per step:
//   compute  = per block, its matmul FLOPs at the rate of their size and its elementwise bytes
//              at the bandwidth, scaled by the measured block's ratio to that count, plus the
//              framework's time; the embeddings, head and loss; forward and backward of every
//              micro-batch, and the optimizer's pass over its (ZeRO) share of the state;
//   bubble   = the pipeline's idle time, from the project's schedule simulator
//              (pipeline::simulate) with each stage's forward and backward times;
//   comm     = tp's all-reduces (or all-gathers and reduce-scatters with sp) around attention
//              and MLP at the fitted bandwidth (their latency is in the framework time), and
//              alpha + bytes / bandwidth per call for the gradient reduction over the replicas
//              (dp x cp) as the ZeRO stage does it, cp's ring of keys and values, pp's
//              activations and their gradients, ep's all-to-alls of routed tokens, and the few
//              small all-reduces every step makes; none is assumed hidden behind compute.
// Context parallelism: a rank computes T / cp tokens of each sequence, its attention matmuls
// at one chunk's size, plus the ring's own ops; its activations keep no T x T probabilities.
// Expert parallelism (a mixture of experts, ep carved from dp): a rank holds 1 / ep of each MoE
// block's experts, whose gradients reduce and whose ZeRO state splits over their own replicas,
// dp x cp / ep; per MoE block and micro-batch its T x k routed rows go to their experts' ranks
// and back by all-to-all (config/expert_volume.h: 2 forward, 2 backward, with one of the counts
// before them), at the all_to_all fit over ep; with balanced routing its expert compute is the
// same as on one rank.
// Memory per rank: parameters, gradients and optimizer state from the parameters' local shapes
// under the plan (of the experts, ep rank 0's), divided over their replicas as the ZeRO stage
// divides them; activations from the per-token counts of Korthikanti et al. (2022) in the
// compute dtype under the layout's recompute (training.activation_checkpoint) with the
// schedule's peak of micro-batches in flight, plus the logits. A layout that does not fit
// keeping every activation is priced again with selective, then full recompute, and kept with
// the first that fits.

namespace {

/// Activations saved for backward at the schedule's peak of micro-batches in flight (per token
/// and block as config/memory_estimate.h counts them, under the layout's recompute), plus what
/// the head keeps: the logits and their gradient, or with the fused loss (NOTE [Fused LM loss])
/// the gradients of the hidden state and of the head's weight; and a recomputed block's working
/// set once.
double activation_bytes(const Shape& s, double blocks, double in_flight) {
  const BlockActivations a = block_activations(
      s.c, ActivationShape{s.C, s.heads, s.t, s.tp, s.sp, s.size, s.cp > 1}, blocks);
  const double head = s.c.fused_loss ? (s.tokens + s.vocab / s.tp) * s.C * s.size
                                     : 2.0 * s.tokens * s.vocab / s.tp * s.size;
  return in_flight * (s.tokens * a.kept + head) + s.tokens * a.working;
}

}  // namespace

Prediction predict(const JobConfig& c, const Layout& layout, const MachineFacts& facts) {
  const LayoutModel lm = layout_model(c);
  const Shape s = shape_of(c, layout, lm);
  Prediction out;
  out.layout = layout;
  const StageTimes stages = stage_times(s, facts);

  // Pipeline: the simulator with forward = 1/3 and backward = 2/3 of each stage's time. The
  // simulator takes one cost for all stages: the slowest stage's.
  const double slowest = *std::max_element(stages.seconds.begin(), stages.seconds.end());
  std::vector<double> rank_busy(c.pp, 0.0);
  for (size_t k = 0; k < lm.pipe.stages.size(); ++k)
    rank_busy[lm.pipe.schedule.stage_rank[k]] += stages.seconds[k] * s.m;
  const double busiest = *std::max_element(rank_busy.begin(), rank_busy.end());
  double pipeline_s = busiest;
  pipeline::Simulation sim;
  if (c.pp > 1) {
    sim = pipeline::simulate(lm.pipe.schedule, 1000, 2000);
    out.bubble = sim.bubble;
    const double unit = slowest / 3000.0;
    pipeline_s = std::max(busiest, static_cast<double>(sim.makespan) * unit);
  }

  const std::vector<StateMemory> state = state_by_rank(c, lm);
  int busiest_rank = 0;
  for (int r = 0; r < static_cast<int>(state.size()); ++r)
    if (state[r].total() > state[busiest_rank].total()) busiest_rank = r;
  const StateMemory& mine = state[busiest_rank];
  out.compute_s = busiest + optimizer_time(s, mine, facts.compute);
  out.bubble_s = pipeline_s - busiest;

  const double blocks = *std::max_element(stages.blocks.begin(), stages.blocks.end()) *
                        (c.pp > 1 ? static_cast<double>(c.pp_virtual) : 1.0);
  out.comm = comm_times(s, mine, blocks, facts);
  // Muon: its busiest rank's Newton-Schulz and exchanges (NOTE [Muon exchange]).
  const std::vector<MuonCost> muon = muon_cost_by_rank(c, lm);
  if (!muon.empty()) {
    out.compute_s += muon_compute_time(muon[busiest_rank], c.ns_steps, facts.compute);
    out.comm.muon = muon_comm_time(muon[busiest_rank], lm.job.mesh(), facts);
  }
  out.comm_s = out.comm.total();

  out.state = mine;
  const double in_flight =
      c.pp > 1
          ? static_cast<double>(*std::max_element(sim.peak_stashed.begin(), sim.peak_stashed.end()))
          : 1.0;
  out.activations = activation_bytes(s, blocks, in_flight);
  return out;
}

Prediction predict_fitting(const JobConfig& base, const Layout& layout, const MachineFacts& facts,
                           double memory_bytes) {
  Prediction p = predict(layout_config(base, layout), layout, facts);
  p.fits = p.memory() <= memory_bytes;
  if (p.fits || layout.recompute != Recompute::kNone) return p;
  for (const Recompute mode : {Recompute::kSelective, Recompute::kFull}) {
    Layout recomputing = layout;
    recomputing.recompute = mode;
    Prediction q = predict(layout_config(base, recomputing), recomputing, facts);
    q.fits = q.memory() <= memory_bytes;
    if (q.fits) return q;
  }
  return p;
}

}  // namespace vescale::autoplan
