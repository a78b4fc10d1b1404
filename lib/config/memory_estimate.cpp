#include "config/memory_estimate.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <string>

#include "config/dtype_policy.h"
#include "core/error.h"
#include "core/units.h"

namespace vescale {

BlockActivations block_activations(const JobConfig& c, const ActivationShape& s, double blocks) {
  const double C = s.n_embd, tp = s.tp;
  const double attention_core = s.ring ? 0.0 : 5.0 * s.n_head * s.seq_len / tp;
  const double rest = s.sp ? 34.0 * C / tp : tp > 1 ? 10.0 * C + 24.0 * C / tp : 34.0 * C;
  const double to_bytes = s.element_bytes / 2.0;  // the counts are at 2 bytes an element
  const double whole = (rest + attention_core) * to_bytes;
  double recomputing = whole;
  if (c.activation_checkpoint == Recompute::kSelective) recomputing = rest * to_bytes;
  if (c.activation_checkpoint == Recompute::kFull)
    recomputing = (s.sp ? C / tp : C) * s.element_bytes;
  const double share = c.recomputed_share();
  BlockActivations out;
  out.kept = blocks * ((1.0 - share) * whole + share * recomputing);
  if (c.activation_checkpoint == Recompute::kFull && share * blocks >= 1.0) out.working = whole;
  return out;
}

double compute_element_bytes(const JobConfig& c) {
  return static_cast<double>(c10::elementSize(dtype_policy(c).compute));
}

MemoryEstimate estimate_memory(const JobConfig& c) {
  MemoryEstimate m;
  const ModelSpec spec = c.model_spec();
  m.parameters = c.family().parameter_count(spec);
  // Bytes per parameter: the value and its gradient in the compute dtype, float32 masters under
  // bf16, and the optimizer's states (AdamW 2, SGD 1) in the state dtype.
  const DTypePolicy dtypes = dtype_policy(c);
  const double element = compute_element_bytes(c);
  const auto state_element = static_cast<double>(c10::elementSize(dtypes.state));
  // Muon: at most AdamW's two (its matrices keep one, NOTE [Muon]), counted as two.
  const double optimizer_states = c.optimizer == OptimizerKind::kSgd ? 1.0 : 2.0;
  const double masters = dtypes.mixed() ? state_element : 0.0;
  m.state_bytes = m.parameters * (2.0 * element + masters + optimizer_states * state_element);
  // LoRA (NOTE [LoRA]): the frozen base is its values alone, whole on every dp rank (ZeRO shards
  // the adapters' state only); the adapters' own state is left out (at rank 16, 1% of a 1.1B
  // Llama's parameters): the floor stays a floor.
  const bool lora = c.lora_rank > 0;
  if (lora) m.state_bytes = m.parameters * element;
  const auto ranks = static_cast<double>(c.world_size());
  const std::optional<TransformerShape> shape = c.family().transformer_shape(spec);
  if (shape) m.expert_parameters = static_cast<double>(shape->n_layer) * shape->expert_parameters;
  // What a rank holds of `params` parameters with `replicas` replicas under the ZeRO stage.
  auto held = [&](double params, double replicas) {
    return params *
           (element / (c.zero >= 3 ? replicas : 1.0) + element / (c.zero >= 2 ? replicas : 1.0) +
            (masters + optimizer_states * state_element) / (c.zero >= 1 ? replicas : 1.0));
  };
  const double pp_tp = static_cast<double>(c.pp * c.tp);
  const double ep = static_cast<double>(c.ep);
  const double replicas = static_cast<double>(c.dp * c.cp);
  m.dense_state_per_rank_bytes = (lora ? (m.parameters - m.expert_parameters) * element
                                       : held(m.parameters - m.expert_parameters, replicas)) /
                                 pp_tp;
  m.expert_state_per_rank_bytes =
      (lora ? m.expert_parameters / ep * element : held(m.expert_parameters / ep, replicas / ep)) /
      pp_tp;
  const double rows = static_cast<double>(c.global_batch_size) /
                      (static_cast<double>(c.dp) * static_cast<double>(c.microbatches));
  // A sample's outputs on one rank: its part of the sequence under context parallelism.
  const double outputs = c.family().output_elements_per_sample(spec) / static_cast<double>(c.cp);
  // The logits of a micro-batch and their gradient; with the fused LM loss (NOTE [Fused LM
  // loss]) a chunk of rows at a time (within 512 MiB of float32 logits) and the hidden state's
  // gradient it keeps.
  const double logits = rows * outputs * state_element;
  const bool fused = c.fused_loss && c.family().objective() == Objective::kNextToken && shape;
  double head = 2.0 * logits;
  if (fused) {
    head = std::min(logits, 512.0 * (1 << 20)) + rows * static_cast<double>(c.seq_len) /
                                                     static_cast<double>(c.cp) *
                                                     static_cast<double>(shape->n_embd) * element;
  }
  m.per_rank_floor_bytes = (lora ? m.dense_state_per_rank_bytes + m.expert_state_per_rank_bytes
                                 : m.state_bytes / ranks) +
                           head;
  if (shape) {
    const double seq_len = static_cast<double>(c.seq_len);
    const ActivationShape a{static_cast<double>(shape->n_embd),
                            static_cast<double>(shape->n_head),
                            seq_len,
                            static_cast<double>(c.tp),
                            true,
                            element,
                            c.cp > 1};
    const BlockActivations blocks =
        block_activations(c, a, static_cast<double>(shape->n_layer) / static_cast<double>(c.pp));
    const double tokens = seq_len / static_cast<double>(c.cp);  // a rank's part of a sequence
    m.activation_bytes = rows * tokens * (blocks.kept + blocks.working);
  }
  return m;
}

double physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0.0;
}

void check_fits_memory(const JobConfig& c, double memory_bytes) {
  if (memory_bytes <= 0) return;
  const MemoryEstimate m = estimate_memory(c);
  if (m.per_rank_floor_bytes <= memory_bytes) return;
  const std::string sizes = describe_keys(c.model_spec(), c.family().size_keys());
  throw UserError(fmt::format(
      "config {}: this model cannot fit: {:.3g} parameters need {} for parameters, gradients and "
      "{} state in {}, so at least {} per rank over the {} ({}) ranks with "
      "one micro-batch's logits (or a chunk of them), and this machine has {} of memory. Check the "
      "model sizes ({}) "
      "and the batch (training.global_batch_size = {}, training.seq_len = {})",
      c.source, m.parameters, format_bytes(m.state_bytes), config_name(c.optimizer),
      config_name(c.dtype), format_bytes(m.per_rank_floor_bytes), dim_sizes_text(c.parallel_dims()),
      dim_names_text(c.parallel_dims()), format_bytes(memory_bytes), sizes, c.global_batch_size,
      c.seq_len));
}

void check_local_processes(int64_t nproc, const std::string& wanted_by, double memory_bytes) {
  const double need = static_cast<double>(nproc) * kWorkerBaseBytes;
  if (memory_bytes <= 0 || need <= memory_bytes) return;
  throw UserError(fmt::format(
      "{} needs {} local worker processes, at least {} in all ({} each before any model state), "
      "and this machine has {} of memory; use fewer ranks, or launch on several machines "
      "(torchrun, Slurm)",
      wanted_by, nproc, format_bytes(need), format_bytes(kWorkerBaseBytes),
      format_bytes(memory_bytes)));
}

void check_local_workers_fit(const JobConfig& c, double memory_bytes, bool activations_here) {
  if (memory_bytes <= 0) return;
  const double workers = static_cast<double>(c.world_size());
  const MemoryEstimate m = estimate_memory(c);
  const double activations = activations_here ? m.activation_bytes : 0.0;
  const double need = workers * (kWorkerBaseBytes + m.per_rank_floor_bytes + activations);
  if (need <= memory_bytes) return;
  const std::string recompute =
      activations_here && c.activation_checkpoint != Recompute::kFull && m.activation_bytes > 0
          ? "; training.activation_checkpoint = \"full\" keeps fewer activations"
          : "";
  throw UserError(fmt::format(
      "config {}: {} needs {} local worker processes, at least "
      "{} in all ({} each before any model state{}), and this machine has {} of memory; use "
      "fewer ranks, or launch on several machines (torchrun, Slurm){}",
      c.source, c.mesh_text(), c.world_size(), format_bytes(need), format_bytes(kWorkerBaseBytes),
      activations_here ? fmt::format(", {} of activations", format_bytes(activations)) : "",
      format_bytes(memory_bytes), recompute));
}

}  // namespace vescale
