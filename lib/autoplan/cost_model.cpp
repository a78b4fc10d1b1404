#include "autoplan/cost_model.h"

#include <c10/util/accumulate.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "config/memory_estimate.h"
#include "config/ring_volume.h"
#include "core/error.h"
#include "dmodule/parallelize.h"
#include "dtensor/dtensor_spec.h"
#include "mesh/job_mesh.h"
#include "parallel/pipeline/schedule.h"
#include "train/model_factory.h"
#include "train/parallel_model.h"
#include "train/task.h"

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
//              activations and their gradients, and the few small all-reduces every step makes;
//              none is assumed hidden behind compute.
// Context parallelism: a rank computes T / cp tokens of each sequence, its attention matmuls
// at one chunk's size, plus the ring's own ops; its activations keep no T x T probabilities.
// Memory per rank: parameters, gradients and optimizer state from the parameters' local shapes
// under the plan, divided over dp as the ZeRO stage divides them; activations from the
// per-token counts of Korthikanti et al. (2022) in the compute dtype under the layout's
// recompute (training.activation_checkpoint) with the schedule's peak of micro-batches in
// flight, plus the logits. A layout that does not fit keeping every activation is priced again
// with selective, then full recompute, and kept with the first that fits.

namespace {

double bytes_of(at::ScalarType t) {
  return static_cast<double>(c10::elementSize(t));
}

/// A layout's model as plan auto sees it, built once per layout: declared (not allocated), its
/// plan resolved on rank 0 of the layout-only mesh, its layers cut into the pipeline's stages.
struct LayoutModel {
  std::shared_ptr<Module> model;
  JobMesh job;
  ResolvedPlan plan;
  std::vector<Layer> layers;
  PipelinePlan pipe;
  std::string vocab_weight;  ///< the weight a transformer's embedding and head share, if any
};

LayoutModel layout_model(const JobConfig& c) {
  auto model = build_model(c);
  JobMesh job = JobMesh::layout(c.mesh_dims());
  ResolvedPlan plan = resolve_plan(job_plan(c), *model, job.param_mesh());
  std::vector<Layer> layers = model_layers(c, *model);
  // Without a pipeline the whole model is one stage, whatever the pipeline keys say.
  JobConfig one = c;
  if (c.pp == 1) {
    one.pp_schedule = PpSchedule::k1F1B;
    one.pp_virtual = 1;
    one.pp_split = {"balanced"};
  }
  PipelinePlan pipe = plan_pipeline(one, layers);
  const std::optional<TransformerShape> shape = c.family().transformer_shape(c.model_spec());
  return {std::move(model),  std::move(job),  std::move(plan),
          std::move(layers), std::move(pipe), shape ? shape->vocab_weight : ""};
}

/// The state each pp rank holds (rank 0 of its tp and dp groups): every stage placed on it.
std::vector<StateMemory> state_by_rank(const JobConfig& c, const LayoutModel& lm) {
  const double param_size = bytes_of(job_dtype(c));
  const double state_size = bytes_of(state_dtype(c));
  const bool master = job_dtype(c) != state_dtype(c);
  const double optimizer_copies =
      c.optimizer == OptimizerKind::kAdamW
          ? 2.0
          : (c.optimizer == OptimizerKind::kSgd && c.momentum > 0 ? 1.0 : 0.0);
  // ZeRO divides over the replicas, dp x cp.
  const double dp = static_cast<double>(c.dp * c.cp);
  std::vector<StateMemory> by_rank(c.pp);
  for (size_t s = 0; s < lm.pipe.stages.size(); ++s) {
    bool has_embedding = false, has_head = false;
    for (int i = lm.pipe.stages[s].begin; i < lm.pipe.stages[s].end; ++i) {
      has_embedding = has_embedding || lm.layers[i].kind == LayerKind::kEmbedding;
      has_head = has_head || lm.layers[i].kind == LayerKind::kHead;
    }
    double elements = 0;
    for (const auto& p : lm.plan.parameters) {
      const bool tied_head = has_head && !has_embedding && p.fqn == lm.vocab_weight;
      if (!under_modules(p.fqn, lm.pipe.modules[s]) && !tied_head) continue;
      const Box box = Box::local(DTensorSpec(lm.job.param_mesh(), p.placements, p.shape));
      elements += static_cast<double>(c10::multiply_integers(box.sizes));
    }
    StateMemory& m = by_rank[lm.pipe.schedule.stage_rank[s]];
    m.params += elements * param_size / (c.zero >= 3 ? dp : 1.0);
    m.grads += elements * param_size / (c.zero >= 2 ? dp : 1.0);
    m.optimizer += elements * state_size * (optimizer_copies + (master ? 1.0 : 0.0)) /
                   (c.zero >= 1 ? dp : 1.0);
  }
  return by_rank;
}

}  // namespace

std::vector<StateMemory> state_memory_by_stage(const JobConfig& c) {
  return state_by_rank(c, layout_model(c));
}

double schedule_bubble(const JobConfig& c) {
  if (c.pp == 1) return 0.0;
  const pipeline::PipelineSchedule schedule =
      pipeline::make_schedule(config_name(c.pp_schedule), static_cast<int>(c.pp),
                              static_cast<int>(c.pp_virtual), static_cast<int>(c.microbatches));
  return pipeline::simulate(schedule).bubble;
}

namespace {

/// What every step of the prediction reads: the layout's config, model and sizes.
struct Shape {
  const JobConfig& c;
  const LayoutModel& lm;
  TransformerShape model;
  double vocab;  ///< padded for the layout's tp
  double tp, dp, m, b, t, C, heads;
  double cp;      ///< context parallel ranks: a rank holds t / cp tokens of each sequence
  double tokens;  ///< per micro-batch on a rank
  bool sp;
  double size;  ///< bytes of a compute-dtype element
};

Shape shape_of(const JobConfig& c, const Layout& layout, const LayoutModel& lm) {
  const std::optional<TransformerShape> model = c.family().transformer_shape(c.model_spec());
  VS_USER_CHECK(model.has_value(),
                "plan auto models transformer families; {} has model.name = '{}'", c.source,
                c.model);
  double vocab = static_cast<double>(model->vocab_size);
  for (const auto& p : lm.plan.parameters)
    if (p.fqn == model->vocab_weight) vocab = static_cast<double>(p.shape[0]);
  const double b = static_cast<double>(c.micro_batch_size());
  const double t = static_cast<double>(c.seq_len);
  return {c,
          lm,
          *model,
          vocab,
          static_cast<double>(c.tp),
          static_cast<double>(c.dp * c.cp),  // the replicas
          static_cast<double>(c.microbatches),
          b,
          t,
          static_cast<double>(model->n_embd),
          static_cast<double>(model->n_head),
          static_cast<double>(c.cp),
          b * t / static_cast<double>(c.cp),
          layout.sp && c.tp > 1,
          bytes_of(job_dtype(c))};
}

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

/// Each pipeline stage's forward + backward of one micro-batch, and its blocks.
struct StageTimes {
  std::vector<double> seconds, blocks;
};

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
  // The stage's parameter elements on this rank before ZeRO-3 divides them; ZeRO 1-3 update
  // 1/dp of them.
  const double param_elems = mine.params / s.size * (c.zero >= 3 ? s.dp : 1.0);
  const double update_elems = c.zero >= 1 ? param_elems / s.dp : param_elems;
  const double n_tensors = 12.0 * static_cast<double>(s.model.n_layer) / c.pp + 4.0;
  return 8.0 * update_elems * bytes_of(state_dtype(c)) / f.stream_bytes_per_s +
         12.0 * n_tensors * f.op_overhead_s;
}

/// dp's gradient reduction (and parameter gathers) per step, as the ZeRO stage does it.
double dp_comm_time(const Shape& s, const StateMemory& mine, double blocks,
                    const MachineFacts& facts) {
  const JobConfig& c = s.c;
  const double grad_bytes = mine.grads * (c.zero >= 2 ? s.dp : 1.0);  // the whole stage's
  const double bucket = std::max(1.0, c.bucket_mb * 1024 * 1024);
  const double buckets = std::ceil(grad_bytes / bucket);
  const auto replicas = static_cast<int64_t>(s.dp);
  auto per_bucket = [&](const std::string& op) {
    return buckets * facts.fit(op, replicas).time(grad_bytes / buckets);
  };
  switch (c.zero) {
    case 0:
      return per_bucket("all_reduce");
    case 1:
      return per_bucket("all_reduce") + per_bucket("all_gather");
    case 2:
      return per_bucket("reduce_scatter") + per_bucket("all_gather");
    default: {
      // Each block's parameters gathered before its forward and its backward, gradients
      // reduce-scattered after its backward, per micro-batch.
      const double per_block = grad_bytes / std::max(1.0, blocks + 1.0);
      return s.m * (blocks + 1.0) *
             (2.0 * facts.fit("all_gather", replicas).time(per_block) +
              facts.fit("reduce_scatter", replicas).time(per_block));
    }
  }
}

/// Communication on the busiest rank per step: tp's activations, the replicas' (dp x cp)
/// gradients, cp's ring, pp's transfers and the few small all-reduces every step makes.
double comm_time(const Shape& s, const StateMemory& mine, double blocks,
                 const MachineFacts& facts) {
  const JobConfig& c = s.c;
  double comm = 0;
  const double act_bytes = s.tokens * s.C * s.size;
  if (c.tp > 1) {
    // Their latency is in the framework time measured at this tp; here, their bytes.
    const double calls = s.m * (4.0 * blocks + 2.0);  // two per block forward, two back; head
    if (s.sp) {
      comm += calls * act_bytes *
              (1.0 / facts.fit("all_gather", c.tp).bytes_per_s +
               1.0 / facts.fit("reduce_scatter", c.tp).bytes_per_s);
    } else {
      comm += calls * act_bytes / facts.fit("all_reduce", c.tp).bytes_per_s;
    }
  }
  if (s.dp > 1) comm += dp_comm_time(s, mine, blocks, facts);
  if (c.cp > 1) {
    // The ring's key/value chunks (and their gradients) to the next cp rank, per block and
    // micro-batch: config/ring_volume.h.
    const RingVolume ring = ring_volume(c);
    comm +=
        s.m * blocks * ring.sends_per_call * facts.fit("send_recv", c.cp).time(ring.kv_pair_bytes);
  }
  if (c.pp > 1) {
    const double crossing = s.sp ? act_bytes / s.tp : act_bytes;
    // Each of the rank's stages sends its output (or receives its input) and the gradient back.
    const double transfers = 2.0 * static_cast<double>(c.pp_virtual);
    comm += s.m * transfers * facts.fit("send_recv", c.pp).time(crossing);
  }
  // Every step: the loss, the gradient norm and the stop flag, each one small all-reduce.
  const int64_t world = c.world_size();
  if (world > 1) comm += 3.0 * facts.fit("all_reduce", world).alpha_s;
  return comm;
}

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
  out.comm_s = comm_time(s, mine, blocks, facts);

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

std::string explain_model(const JobConfig& base, const MachineFacts& facts) {
  std::string out = fmt::format(
      "cost model (NOTE [Plan auto] in lib/autoplan/cost_model.cpp) for {} on {} ranks of {} "
      "({} cores; {})\n",
      base.source, facts.nproc, facts.host, facts.cores, facts.threads);
  out += "measured while every rank measured at once:\n";
  for (const auto& [flops, rate] : facts.compute.gemm)
    out +=
        fmt::format("  matmul of {:>12.0f} FLOPs: {:8.2f} GFLOP/s per rank\n", flops, rate / 1e9);
  out += fmt::format("  one small ATen op: {:.2f} us\n", facts.compute.op_overhead_s * 1e6);
  out += fmt::format(
      "  framework time per micro-batch, forward + backward: {:.3f} ms per GPT block, {:.3f} ms "
      "for embeddings, head and loss\n"
      "  a GPT block of B = {}, T = {}, {} heads, C = {}, forward + backward: {:.3f} ms\n",
      facts.compute.block_overhead_s * 1e3, facts.compute.model_overhead_s * 1e3, kBlockProbe.batch,
      kBlockProbe.seq_len, kBlockProbe.n_head, kBlockProbe.n_embd,
      facts.compute.block_probe_s * 1e3);
  for (const auto& [plan, sizes] : facts.tp_framework)
    for (const auto& [size, t] : sizes)
      out += fmt::format(
          "  framework time under {} at tp = {}: {:.3f} ms per block, {:.3f} ms "
          "for the rest (collectives' latency included)\n",
          plan, size, t.block_s * 1e3, t.model_s * 1e3);
  out += fmt::format("  elementwise bandwidth: {:.2f} GB/s per rank\n",
                     facts.compute.stream_bytes_per_s / 1e9);
  for (const auto& [op, sizes] : facts.comm)
    for (const auto& [size, fit] : sizes)
      out += fmt::format("  {:<15} over {:>3} ranks: {:8.1f} us + bytes / {:.3f} GB/s\n", op, size,
                         fit.alpha_s * 1e6, fit.bytes_per_s / 1e9);
  out +=
      "assumed (analytic):\n"
      "  a block, forward + backward: matmul FLOPs 6 per parameter per token at the rate of "
      "the MLP's first matmul, + 12 C T per token at the rate of one T x T x C/heads "
      "attention matmul (the MFU count), split evenly over tp; elementwise per token, "
      "forward: 14 C (C/tp with sp) + 12 C/tp + 8 heads T / tp elements, backward twice "
      "that; times the measured block's ratio to this count at its size, plus the framework "
      "time per block measured at the layout's tp degree and plan\n"
      "  embeddings, head and loss: their matmuls at the MLP's rate, ~6 passes over the "
      "logits, and the measured framework time\n"
      "  optimizer: 8 float32 passes over its share of the parameters, 12 ops per tensor\n"
      "  tp: 4 all-reduces (sp: all-gather + reduce-scatter) of B T C per block and "
      "micro-batch, 2 more for embedding and head, at the fitted bandwidth (their latency "
      "is in the framework time measured at that tp)\n"
      "  dp: gradients all-reduced in comm.bucket_mb buckets (zero 1: + all-gather of "
      "parameters; 2: reduce-scatter + all-gather; 3: per block and micro-batch 2 "
      "all-gathers + 1 reduce-scatter)\n"
      "  pp: activations and their gradients sent at each stage boundary, per micro-batch\n"
      "  no communication is hidden behind compute; the bubble is the schedule simulator's\n"
      "  activations: Korthikanti et al. (2022) per token and block in the compute dtype, "
      "times the schedule's peak of micro-batches in flight, plus logits and their gradient; "
      "recompute: selective drops the attention core's 5 heads T, full keeps the block's input "
      "and adds one block's activations while it reruns\n"
      "  recompute's time: full reruns a block's forward (1/3 of its forward + backward; 2/3 "
      "under zb-h1 and zbv, whose I and W halves each rerun it), selective the attention "
      "core's forward (4 C T of the 6 P + 12 C T FLOPs per token)\n";
  return out;
}

}  // namespace vescale::autoplan
