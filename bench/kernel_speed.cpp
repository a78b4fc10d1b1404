// vescale-kernel-speed: each of our CUDA kernels' rows of the kernel table (NOTE [CUDA kernels])
// timed against the row that runs in its place when it is off (its fallback: the next row that
// holds), forward and backward through the table's own paths, at a size a training step gives it.
// Prints a Markdown table: milliseconds a forward and backward, the rate (GB/s of the bytes the
// op must move at the least, or TFLOP/s for the grouped GEMM; the fallback's figure over the same
// bytes or FLOPs), the speed-up and a verdict: a row slower than its fallback stays off (issue
// [45]: the table prefers none of them on a speed not measured). scripts/gpu-check.sh's kernels
// stage runs it.
//
//   vescale-kernel-speed [--device cuda|cpu] [--small] [--rounds N]
//
// --device cpu (no GPU: gpu-check --cpu) times the fallbacks alone, our rows being CUDA's; --small
// takes shapes that run in a second on a CPU. Exit 0, 2 for a wrong argument, 1 on an error.
#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "dtensor/linear_cross_entropy.h"
#include "kernels/kernel_table.h"

namespace vescale::kernels {
namespace {

struct Options {
  c10::Device device{c10::kCUDA, 0};
  bool small = false;
  int rounds = 5;
};

/// One op at one size: its name and shape for the table, what it moves (bytes) or computes
/// (FLOPs) a forward and backward at the least, and a forward and backward by a row.
template <typename Path>
struct Op {
  std::string name, shape;
  double work;  ///< bytes, or FLOPs where `flops`
  bool flops;
  std::function<void(const Path&)> run;
};

void sync(const c10::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize();
}

/// Milliseconds a call of `run` (each computes its gradients by torch::autograd::grad, which
/// accumulates nothing into the leaves): the median over `rounds` rounds of `per_round` calls,
/// after two calls of warm-up.
double time_ms(const Options& o, const std::function<void()>& run) {
  const int per_round = o.device.is_cuda() ? 10 : 2;
  run();
  run();
  sync(o.device);
  std::vector<double> ms;
  for (int r = 0; r < o.rounds; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < per_round; ++i)
      run();
    sync(o.device);
    const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - start;
    ms.push_back(took.count() / per_round);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

std::string rate(double work, bool flops, double ms) {
  const double per_second = work / (ms * 1e-3);
  char text[32];
  if (!flops) {
    std::snprintf(text, sizeof text, "%.0f GB/s", per_second / 1e9);
  } else if (per_second >= 1e12) {
    std::snprintf(text, sizeof text, "%.1f TFLOP/s", per_second / 1e12);
  } else {
    std::snprintf(text, sizeof text, "%.1f GFLOP/s", per_second / 1e9);
  }
  return text;
}

/// A table's first row (ours, CUDA's) against the next row that holds, as a row of the table.
template <typename Path, size_t N>
void time_op(const Options& o, const std::array<Path, N>& table, at::ScalarType dtype,
             const Op<Path>& op) {
  KernelContext context{o.device, dtype};
  context.unverified = true;  // ours is timed whether or not a GPU has verified it
  const Path& ours = table.front();
  const Path* fallback = &table.back();
  for (size_t i = 1; i < N; ++i) {
    if (holds(table[i], context)) {
      fallback = &table[i];
      break;
    }
  }
  const double theirs_ms = time_ms(o, [&] { op.run(*fallback); });
  std::string ours_cells = "— | —", ratio = "—", verdict;
  if (holds(ours, context)) {
    const double ours_ms = time_ms(o, [&] { op.run(ours); });
    char text[64];
    std::snprintf(text, sizeof text, "%.3f | %s", ours_ms,
                  rate(op.work, op.flops, ours_ms).c_str());
    ours_cells = text;
    std::snprintf(text, sizeof text, "%.2fx", theirs_ms / ours_ms);
    ratio = text;
    verdict = ours_ms <= theirs_ms ? "faster: may be GPU-verified"
                                   : "SLOWER: stays off (leave its gpu_run unwritten)";
  } else {
    verdict = "not timed: " + why_not(ours, context);
  }
  std::printf("| %s | %s | %s | %s | %.3f | %s | %s | %s |\n", op.name.c_str(), op.shape.c_str(),
              ours_cells.c_str(), fallback->name, theirs_ms,
              rate(op.work, op.flops, theirs_ms).c_str(), ratio.c_str(), verdict.c_str());
  std::fflush(stdout);
}

at::Tensor input(const std::vector<int64_t>& shape, const Options& o, at::ScalarType dtype,
                 bool grad = true) {
  return at::randn(shape, at::dtype(dtype).device(o.device)).requires_grad_(grad);
}

std::string dims(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

void run_all(const Options& o) {
  const at::ScalarType dtype = o.small ? at::kFloat : at::kBFloat16;
  const double bytes = static_cast<double>(c10::elementSize(dtype));
  std::printf(
      "| kernel row (%s, forward + backward) | shape | ours ms | ours rate | fallback row "
      "| fallback ms | fallback rate | speed-up | verdict |\n",
      c10::toString(dtype));
  std::printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");

  {  // SwiGLU: tokens x intermediate; forward 3 tensors, backward 5.
    const std::vector<int64_t> shape =
        o.small ? std::vector<int64_t>{256, 512} : std::vector<int64_t>{16384, 8192};
    const at::Tensor gate = input(shape, o, dtype), up = input(shape, o, dtype);
    const at::Tensor grad = input(shape, o, dtype, false);
    const double n = static_cast<double>(gate.numel());
    time_op<SwigluPath>(o, kSwigluPaths, dtype,
                        {"SwiGLU", dims(shape), 8 * n * bytes, false, [&](const SwigluPath& p) {
                           torch::autograd::grad({p.run(gate, up)}, {gate, up}, {grad});
                         }});
  }
  {  // Rotary: q of [B, H, T, D]; forward and backward each read and write it.
    const std::vector<int64_t> shape =
        o.small ? std::vector<int64_t>{2, 4, 64, 32} : std::vector<int64_t>{8, 32, 2048, 128};
    const at::Tensor x = input(shape, o, dtype), grad = input(shape, o, dtype, false);
    const at::Tensor positions = at::arange(shape[2], at::dtype(at::kLong).device(o.device));
    time_op<RotaryPath>(o, kRotaryPaths, dtype,
                        {"rotary", dims(shape), 4 * static_cast<double>(x.numel()) * bytes, false,
                         [&](const RotaryPath& p) {
                           torch::autograd::grad({p.run(x, 10000.0, positions)}, {x}, {grad});
                         }});
  }
  for (const NormKind kind : {NormKind::kLayerNorm, NormKind::kRmsNorm}) {
    // Residual add + norm: forward reads 2 and writes 2, backward reads 3 and writes 2.
    const std::vector<int64_t> shape =
        o.small ? std::vector<int64_t>{256, 512} : std::vector<int64_t>{16384, 4096};
    const bool layer_norm = kind == NormKind::kLayerNorm;
    const at::Tensor x = input(shape, o, dtype), delta = input(shape, o, dtype);
    const at::Tensor w = input({shape[1]}, o, dtype);
    const at::Tensor b = layer_norm ? input({shape[1]}, o, dtype) : at::Tensor();
    const at::Tensor d_sum = input(shape, o, dtype, false),
                     d_normed = input(shape, o, dtype, false);
    std::vector<at::Tensor> leaves{x, delta, w};
    if (layer_norm) leaves.push_back(b);
    time_op<AddNormPath>(
        o, kAddNormPaths, dtype,
        {layer_norm ? "add + LayerNorm" : "add + RMSNorm", dims(shape),
         9 * static_cast<double>(x.numel()) * bytes, false, [&](const AddNormPath& p) {
           const auto [sum, normed] = p.run(kind, x, delta, w, b, 1e-5);
           torch::autograd::grad({sum, normed}, leaves, {d_sum, d_normed});
         }});
  }
  {  // LM loss: a chunk of logits read once, its gradient written once.
    const std::vector<int64_t> shape =
        o.small ? std::vector<int64_t>{64, 2048} : std::vector<int64_t>{8192, 50304};
    const at::Tensor logits = input(shape, o, dtype, false);
    const at::Tensor targets =
        at::randint(shape[1], {shape[0]}, at::dtype(at::kLong).device(o.device));
    local::VocabSlice vocab;
    vocab.real = shape[1];
    time_op<LossPath>(o, kLossPaths, dtype,
                      {"LM loss", dims(shape), 2 * static_cast<double>(logits.numel()) * bytes,
                       false, [&](const LossPath& p) {
                         local::loss_chunk(p.id, logits, targets, vocab, at::kFloat,
                                           static_cast<double>(shape[0]), true);
                       }});
  }
  {  // MoE experts: rows by expert, uneven, through SwiGLU experts; 3 GEMMs forward, 6 backward.
    const int64_t experts = o.small ? 4 : 8, rows = o.small ? 256 : 16384;
    const int64_t c = o.small ? 64 : 2048, inner = o.small ? 128 : 5632;
    std::vector<int64_t> counts;
    int64_t left = rows;
    for (int64_t e = 0; e < experts; ++e) {
      const int64_t n = e + 1 == experts ? left : rows / experts + (e % 2 ? -rows / 16 : rows / 16);
      counts.push_back(n);
      left -= n;
    }
    const at::Tensor h = input({rows, c}, o, dtype), grad = input({rows, c}, o, dtype, false);
    const at::Tensor n = at::tensor(counts, at::kLong).to(o.device);
    std::vector<ExpertWeights> weights;
    for (int64_t e = 0; e < experts; ++e)
      weights.push_back({input({inner, c}, o, dtype).mul(0.02).detach().requires_grad_(),
                         input({inner, c}, o, dtype).mul(0.02).detach().requires_grad_(),
                         input({c, inner}, o, dtype).mul(0.02).detach().requires_grad_()});
    std::vector<at::Tensor> leaves{h};
    for (const ExpertWeights& e : weights)
      leaves.insert(leaves.end(), {e.w1, e.w3, e.w2});
    const double flops = 18.0 * static_cast<double>(rows * inner * c);
    time_op<ExpertsPath>(o, kExpertsPaths, dtype,
                         {"MoE experts",
                          std::to_string(experts) + " experts, " + std::to_string(rows) +
                              " rows, C " + std::to_string(c) + ", I " + std::to_string(inner),
                          flops, true, [&](const ExpertsPath& p) {
                            torch::autograd::grad({p.run(h, n, weights, 1.0)}, leaves, {grad});
                          }});
  }
}

int usage(const char* why) {
  std::fprintf(stderr,
               "vescale-kernel-speed: %s\nusage: vescale-kernel-speed [--device cuda|cpu] "
               "[--small] [--rounds N]\n",
               why);
  return 2;
}

}  // namespace
}  // namespace vescale::kernels

int main(int argc, char** argv) {
  using namespace vescale::kernels;
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--small") {
      o.small = true;
    } else if ((arg == "--device" || arg == "--rounds") && i + 1 < argc) {
      const std::string value = argv[++i];
      if (arg == "--rounds") {
        o.rounds = std::atoi(value.c_str());
        if (o.rounds < 1) return usage("--rounds takes a count of 1 or more");
      } else if (value == "cpu") {
        o.device = c10::Device(c10::kCPU);
      } else if (value != "cuda") {
        return usage(("--device " + value + ": cuda or cpu").c_str());
      }
    } else if (arg == "-h" || arg == "--help") {
      std::printf(
          "vescale-kernel-speed [--device cuda|cpu] [--small] [--rounds N]: our CUDA "
          "kernels' rows against their fallbacks, forward + backward (bench/"
          "kernel_speed.cpp)\n");
      return 0;
    } else {
      return usage(("unknown argument " + arg).c_str());
    }
  }
  if (o.device.is_cuda() && !at::hasCUDA()) {
    std::fprintf(stderr, "vescale-kernel-speed: no GPU here; --device cpu times the fallbacks\n");
    return 2;
  }
  try {
    vescale::kernels::set_unverified_kernels(true);  // the dispatches inside the MoE rows too
    run_all(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vescale-kernel-speed: %s\n", e.what());
    return 1;
  }
  return 0;
}
