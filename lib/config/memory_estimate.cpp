#include "config/memory_estimate.h"

#include <fmt/format.h>
#include <unistd.h>

#include <string>

#include "core/error.h"
#include "core/units.h"

namespace vescale {
MemoryEstimate estimate_memory(const JobConfig& c) {
  MemoryEstimate m;
  const ModelSpec spec = c.model_spec();
  m.parameters = c.family().parameter_count(spec);
  // Bytes per parameter: the value and its gradient in the compute dtype, float32 masters under
  // bf16, and the optimizer's states (AdamW 2, SGD 1) in the state dtype.
  const double element = c.dtype == "float64" ? 8.0 : c.dtype == "bfloat16" ? 2.0 : 4.0;
  const double state_element = c.dtype == "float64" ? 8.0 : 4.0;
  const double optimizer_states = c.optimizer == "sgd" ? 1.0 : 2.0;
  const double masters = c.dtype == "bfloat16" ? 4.0 : 0.0;
  m.state_bytes = m.parameters * (2.0 * element + masters + optimizer_states * state_element);
  const double ranks =
      static_cast<double>(c.pp) * static_cast<double>(c.dp) * static_cast<double>(c.tp);
  const double rows = static_cast<double>(c.global_batch_size) /
                      (static_cast<double>(c.dp) * static_cast<double>(c.microbatches));
  const double outputs = c.family().output_elements_per_sample(spec);
  m.per_rank_floor_bytes = m.state_bytes / ranks + 2.0 * rows * outputs * state_element;
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
      "one micro-batch's logits, and this machine has {} of memory. Check the model sizes ({}) "
      "and the batch (training.global_batch_size = {}, training.seq_len = {})",
      c.source, m.parameters, format_bytes(m.state_bytes), c.optimizer, c.dtype,
      format_bytes(m.per_rank_floor_bytes), dim_sizes_text(c.parallel_dims()),
      dim_names_text(c.parallel_dims()), format_bytes(memory_bytes), sizes, c.global_batch_size,
      c.seq_len));
}

void check_local_workers_fit(const JobConfig& c, double memory_bytes) {
  if (memory_bytes <= 0) return;
  const double workers = static_cast<double>(c.world_size());
  const double need = workers * (kWorkerBaseBytes + estimate_memory(c).per_rank_floor_bytes);
  if (need <= memory_bytes) return;
  throw UserError(fmt::format(
      "config {}: {} needs {} local worker processes, at least "
      "{} in all ({} each before any model state), and this machine has {} of memory; use fewer "
      "ranks, or launch on several machines (torchrun, Slurm)",
      c.source, c.mesh_text(), c.world_size(), format_bytes(need), format_bytes(kWorkerBaseBytes),
      format_bytes(memory_bytes)));
}

}  // namespace vescale
