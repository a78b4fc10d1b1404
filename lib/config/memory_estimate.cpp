#include "config/memory_estimate.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"
#include "core/units.h"

namespace vescale {
namespace {

double parameters_of(const JobConfig& c) {
  if (c.model == "mlp") {
    const double in = static_cast<double>(c.d_in), h = static_cast<double>(c.d_hidden),
                 out = static_cast<double>(c.d_out);
    const double middle = std::max(0.0, static_cast<double>(c.n_layers) - 2.0);
    return in * h + h + middle * (h * h + h) + h * out + out;
  }
  const double multiple =
      static_cast<double>(std::max<int64_t>(1, c.vocab_multiple)) * static_cast<double>(c.tp);
  const double vocab = std::ceil(static_cast<double>(c.vocab_size) / multiple) * multiple;
  const double e = static_cast<double>(c.n_embd);
  // wte, wpe, per block q/k/v/c_proj + c_fc/c_proj + two LayerNorms, ln_f.
  return vocab * e + static_cast<double>(c.block_size) * e +
         static_cast<double>(c.n_layer) * (12.0 * e * e + 13.0 * e) + 2.0 * e;
}

}  // namespace

MemoryEstimate estimate_memory(const JobConfig& c) {
  MemoryEstimate m;
  m.parameters = parameters_of(c);
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
  const double width = c.model == "mlp"
                           ? static_cast<double>(c.d_out)
                           : static_cast<double>(c.vocab_size) / static_cast<double>(c.tp);
  const double positions = c.model == "mlp" ? 1.0 : static_cast<double>(c.seq_len);
  m.per_rank_floor_bytes = m.state_bytes / ranks + 2.0 * rows * positions * width * state_element;
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
  const std::string sizes =
      c.model == "mlp"
          ? fmt::format(
                "model.d_in = {}, model.d_hidden = {}, model.d_out = {}, model.n_layers = {}",
                c.d_in, c.d_hidden, c.d_out, c.n_layers)
          : fmt::format(
                "model.n_layer = {}, model.n_embd = {}, model.vocab_size = {}, "
                "model.block_size = {}",
                c.n_layer, c.n_embd, c.vocab_size, c.block_size);
  throw UserError(fmt::format(
      "config {}: this model cannot fit: {:.3g} parameters need {} for parameters, gradients and "
      "{} state in {}, so at least {} per rank over the {} x {} x {} (pp x dp x tp) ranks with "
      "one micro-batch's logits, and this machine has {} of memory. Check the model sizes ({}) "
      "and the batch (training.global_batch_size = {}, training.seq_len = {})",
      c.source, m.parameters, format_bytes(m.state_bytes), c.optimizer, c.dtype,
      format_bytes(m.per_rank_floor_bytes), c.pp, c.dp, c.tp, format_bytes(memory_bytes), sizes,
      c.global_batch_size, c.seq_len));
}

void check_local_workers_fit(const JobConfig& c, double memory_bytes) {
  if (memory_bytes <= 0) return;
  const double workers = static_cast<double>(c.world_size());
  const double need = workers * (kWorkerBaseBytes + estimate_memory(c).per_rank_floor_bytes);
  if (need <= memory_bytes) return;
  throw UserError(fmt::format(
      "config {}: parallel.pp x dp x tp = {} x {} x {} needs {} local worker processes, at least "
      "{} in all ({} each before any model state), and this machine has {} of memory; use fewer "
      "ranks, or launch on several machines (torchrun, Slurm)",
      c.source, c.pp, c.dp, c.tp, c.world_size(), format_bytes(need),
      format_bytes(kWorkerBaseBytes), format_bytes(memory_bytes)));
}

}  // namespace vescale
