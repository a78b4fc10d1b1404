// `plan auto --explain`: the facts the cost model measured and the counts it assumes, in words
// (NOTE [Plan auto]).
#include <fmt/format.h>

#include "autoplan/cost_model.h"

namespace vescale::autoplan {

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
      "  pp: activations and their gradients sent at each stage boundary, per micro-batch\n";
  if (base.family().experts_per_layer(base.model_spec()) > 0) {
    out += fmt::format(
        "  ep: per MoE block and micro-batch, an all-to-all of the layer's expert counts "
        "(int64) and 4 of its T x k routed rows of C (2 forward, 2 backward; full recompute "
        "reruns the forward's 3), each priced for its whole buffer at the {} fit over ep; the "
        "experts' gradients reduced, and their ZeRO state split, over dp x cp / ep; a rank holds "
        "1 / ep of each MoE block's experts\n",
        facts.comm.count("all_to_all") ? "all_to_all"
                                       : "all_gather (this calibration has no all_to_all)");
  }
  if (base.optimizer == OptimizerKind::kMuon) {
    out +=
        "  muon: the busiest rank's own matrices' Newton-Schulz (optimizer.ns_steps x (4 m^2 n "
        "+ 2 m^3) FLOPs for an m x n matrix, m <= n) at the matmul rate of its products, and "
        "its exchanges: per class of matrices split over the same dims, 2 all-to-alls a dim "
        "carrying the bytes its pieces send there and back (NOTE [Muon exchange]), at the "
        "all_to_all fit of that dim's size; its matrices keep one state tensor, AdamW's "
        "parameters two\n";
  }
  out +=
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
