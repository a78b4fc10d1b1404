// What `plan auto`'s cost model knows of the machine (NOTE [Plan auto]), all measured here while
// `nproc` ranks run at once, so sharing the cores is in the figures: the matmul rate by matmul
// size, the cost of one small ATen op, the elementwise memory bandwidth, and a latency and
// bandwidth fit per collective and group size. Cached as JSON in the dump folder.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace vescale {
class DeviceMesh;
}

namespace vescale::autoplan {

/// A collective's time for one call of `bytes`: alpha + bytes / bytes_per_s.
struct CommFit {
  double alpha_s = 0;
  double bytes_per_s = 0;
  double time(double bytes) const { return alpha_s + bytes / bytes_per_s; }
};

/// A GPT shape the calibration times a block at: sequences, length, heads, width.
struct GptProbe {
  int64_t batch, seq_len, n_head, n_embd;
};
/// The block the calibration times at a real size (gpt-tiny's on dp = 4).
constexpr GptProbe kBlockProbe{4, 64, 4, 128};

/// One rank's compute facts, measured while every other rank measures the same.
struct ComputeFacts {
  /// (FLOPs of one float32 matmul call, FLOP/s it ran at), by increasing size.
  std::vector<std::pair<double, double>> gemm;
  double op_overhead_s = 0;  ///< one ATen op on a tiny tensor
  /// The framework's own time per micro-batch, forward and backward, of a GPT block and of the
  /// rest (embeddings, head, loss): a tiny GPT (C = 16, T = 8) with 1 and 3 blocks on one rank.
  double block_overhead_s = 0;
  double model_overhead_s = 0;
  /// One GPT block's forward and backward at kBlockProbe's size: what the matmul rate and the
  /// framework time leave out (elementwise work, copies, autograd) is measured here.
  double block_probe_s = 0;
  double stream_bytes_per_s = 0;  ///< bytes read + written per second by a large add

  /// The FLOP/s of a matmul of `flops`, interpolated in log-log between measured sizes.
  double gemm_rate(double flops) const;
};

/// The framework's own time per micro-batch, forward and backward, of a GPT block and of the
/// rest of the model (embeddings, head, loss), measured on a tiny GPT (T = 8, C = 8 x heads):
/// at tp > 1 the latency of tp's collectives and redistributions is in it.
struct FrameworkTime {
  double block_s = 0;
  double model_s = 0;
};

struct MachineFacts {
  int64_t nproc = 0;
  std::string host;
  int64_t cores = 0;
  std::string threads;  ///< the thread budget the ranks ran with
  ComputeFacts compute;
  /// Collective ("all_reduce", "all_gather", "reduce_scatter", "send_recv") -> group size -> fit.
  std::map<std::string, std::map<int64_t, CommFit>> comm;

  /// Plan ("megatron-tp", "megatron-sp") -> tp degree (> 1) -> the framework's time under it.
  std::map<std::string, std::map<int64_t, FrameworkTime>> tp_framework;

  /// The fit of `op` over a group of `size`; throws Error when it was not measured.
  const CommFit& fit(const std::string& op, int64_t size) const;
  /// The framework's time at `tp` under the sp or the plain tp plan (tp = 1: the compute
  /// facts'); throws Error when it was not measured.
  FrameworkTime framework(int64_t tp, bool sp) const;

  std::string to_json() const;
  /// Throws UserError naming `source` when the text is not facts of this format.
  static MachineFacts from_json(const std::string& text, const std::string& source);
};

/// Measures this rank's compute facts (~1.5 s): matmuls of 32^3 to 512^3, a 16-element add, an
/// add of 4M floats, and a tiny GPT's forward and backward.
ComputeFacts measure_compute();

/// The framework's time on `mesh` (1-D: a tp group of every rank measuring at once) under the zoo
/// plan `plan` (empty: replicate). *Collective* over the mesh: a fixed number of steps.
FrameworkTime measure_framework(const DeviceMesh& mesh, const std::string& plan);

/// Least-squares latency and bandwidth through (bytes, seconds) points (two or more sizes).
CommFit fit_comm(const std::vector<std::pair<double, double>>& points);

}  // namespace vescale::autoplan
