// Training metrics (docs/design.md §11): one line per log interval on rank 0 and one JSON object
// per line in <dump_folder>/metrics.jsonl.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "comm/comm_stats.h"
#include "core/device.h"
#include "core/gpu_memory.h"
#include "train/step_anatomy.h"

namespace vescale {

/// Training state bytes by kind, in this order: params, grads, optimizer (and, measured by the
/// trainer, activations).
using StateBytes = std::vector<std::pair<std::string, int64_t>>;
/// Bytes by mesh dim label, then by collective kind ("all_reduce", "reduce_scatter", ...).
using CommBytesByKind = std::map<std::string, std::map<std::string, int64_t>>;

struct StepMetrics {
  int64_t step = 0;  ///< 1-based: steps done
  int64_t total_steps = 0;
  double loss = 0;
  std::optional<double> val_loss;
  /// A mixture of experts: the router's auxiliary loss (NOTE [MoE auxiliary loss]) and the most
  /// unbalanced layer's max / mean tokens routed per expert (1: balanced).
  std::optional<double> aux_loss;
  std::optional<double> expert_load_max_over_mean;
  double lr = 0;
  double grad_norm = 0;
  double tokens_per_s = 0;
  double mfu = 0;         ///< fraction
  int64_t mem_bytes = 0;  ///< host RSS
  /// On a GPU: the caching allocator's peaks since the previous metrics line (NOTE [GPU memory
  /// figures]); allocated and reserved now.
  std::optional<GpuMemory> gpu_mem;
  /// Rank 0's training state by kind, from tensor sizes: "params", "grads", "optimizer", and
  /// "activations" where the memory meter runs (NOTE [Activation bytes] in trainer.cpp).
  StateBytes state_bytes;
  std::map<std::string, int64_t> comm_bytes;  ///< per step, by mesh dim
  CommBytesByKind comm_bytes_by_kind;         ///< per step, by mesh dim and kind; no zero kinds
  double step_time_s = 0;
  StepAnatomy time;                           ///< NOTE [Step anatomy]
  std::map<std::string, double> comm_wait_s;  ///< blocked in waits, by mesh dim
  /// Training stalled by checkpoint saves since the previous metrics line (a save follows its
  /// step's line, so it is outside step_time_s; NOTE [Step anatomy]).
  double checkpoint_stall_s = 0;
  double eta_s = 0;
};

/// Sets `m.comm_bytes` and `m.comm_bytes_by_kind` to what was sent between two CommStats
/// snapshots, leaving out the "world" group.
void set_comm_bytes(StepMetrics& m, const comm::CommSnapshot& before,
                    const comm::CommSnapshot& after);

/// The step's waits: `after` - `before` by mesh dim ("world" left out).
void set_comm_waits(StepMetrics& m, const comm::WaitSnapshot& before,
                    const comm::WaitSnapshot& after);
/// The step's phases (NOTE [Step anatomy]) in order, and "other": the rest of step_time_s.
std::vector<std::pair<std::string, double>> step_phases(const StepMetrics& m);

/// "step 120/2000 | loss 1.9342 | lr 2.9e-4 | grad_norm 0.81 | tok/s 51,240 | mfu 0.42% | ...".
std::string format_metrics_line(const StepMetrics& m);
/// The JSON object of one line of metrics.jsonl (`run_id` first, when given).
std::string metrics_json(const StepMetrics& m, const std::string& run_id = "");

/// Appends metrics.jsonl lines of run `run_id`, each carrying it (rank 0 only: others pass an
/// empty path). The file is opened without following a symbolic link (NOTE [One run per dump
/// folder]).
class MetricsWriter {
 public:
  MetricsWriter(const std::string& path, const std::string& run_id);
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;
  ~MetricsWriter();
  /// Appends one line (creating the file at the first); a failed write is logged once.
  void write(const StepMetrics& m);

 private:
  std::string path_, run_id_;
  int fd_ = -1;
  bool failed_ = false;
};

/// Drops the lines of the metrics.jsonl at `path` whose "step" is after `step` (a run resumed from
/// a checkpoint of that step writes them again) and a last line that is not JSON (a write torn by
/// a crash); other lines are kept as they are. Rewrites the file atomically, and only when that
/// changes it. Returns the number of lines dropped (NOTE [One run per dump folder]).
int64_t drop_metrics_after(const std::filesystem::path& path, int64_t step);

/// This process's resident memory in bytes.
int64_t resident_bytes();
/// The most resident memory this process has had, in bytes.
int64_t peak_resident_bytes();
/// Measured FLOP/s of this process multiplying two n x n matrices in `dtype` on `device`, timed
/// for about `seconds` after one warm-up call (on a GPU the clock reads once the queued matmuls
/// are done).
double measured_matmul_flops(int64_t n, double seconds, Device device = kCpu,
                             at::ScalarType dtype = at::kFloat);
/// measured_matmul_flops(512, 0.2) on the host CPU: the MFU peak a CUDA job falls back to before
/// a GPU has run the device table (NOTE [MFU peak]).
double measured_peak_flops();

}  // namespace vescale
