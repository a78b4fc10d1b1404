// NOTE [Kernel table]: the order of every table over every context, and every path of every table
// run against the table's explicit path, as ggml's test-backend-ops runs each backend against the
// CPU: the same inputs, in the same dtype, the explicit path on the CPU as the reference, and the
// normalised error (max |difference| / max |reference|) printed for each case. Paths run where
// they hold: on the CPU here, on CUDA where a GPU is.
#include "kernels/kernel_table.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <cstdio>
#include <limits>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "dtensor/context_parallel.h"
#include "dtensor/kv_cache.h"
#include "dtensor/linear_cross_entropy.h"
#include "dtensor/ring_attention.h"
#include "support/errors.h"
#include "support/run_ranks.h"
#include "support/tensors.h"

namespace vescale::kernels {
namespace {

using testing::error_of;
using testing::pattern;
using Outputs = std::vector<at::Tensor>;

using testing::kGpu;

/// The dtypes each path runs in: float16 on CUDA too, where our kernels' Half branches and the
/// tensor cores' __half path run (the CPU's explicit rows are its reference: placed()).
std::vector<at::ScalarType> dtypes_on(Device device) {
  std::vector<at::ScalarType> out{at::kFloat, at::kDouble, at::kBFloat16};
  if (device.is_cuda()) out.push_back(at::kHalf);
  return out;
}

/// `t` rounded to `dtype`, on `device`; float16 on the CPU is then computed in float32, since the
/// explicit rows run on the CPU as the reference and LibTorch 1.13's CPU kernels lack float16.
at::Tensor placed(const at::Tensor& t, Device device, at::ScalarType dtype) {
  const at::Tensor rounded = t.to(dtype);
  return !device.is_cuda() && dtype == at::kHalf ? rounded.to(at::kFloat) : rounded.to(device);
}

std::string describe(const KernelContext& c) {
  return c.device.str() + " " + c10::toString(c.dtype) + (c.kv_cache ? ", KV cache" : "") +
         (c.cp_ring ? ", cp ring" : "") +
         (c.build.fused_attention ? ", fused attention built" : "") +
         (c.build.fused_adamw ? ", fused AdamW built" : "") +
         (c.vocab_split ? ", vocabulary split" : "") +
         (c.unverified ? ", unverified rows taken" : "") +
         (c.masked_targets ? ", masked targets" : "");
}

/// Every context a table can be asked about: both devices, four dtypes, a KV cache and a ring
/// open or not, this build, a build with none of the LibTorch kernels and one with all, the
/// vocabulary split or not, the rows no GPU has run taken or not, and a loss mask or not.
std::vector<KernelContext> every_context() {
  std::vector<KernelContext> out;
  const BuildFlags none{false, false, false, false}, all{true, true, true, true};
  for (const Device& device : {kCpu, kGpu}) {
    for (at::ScalarType dtype : {at::kFloat, at::kDouble, at::kBFloat16, at::kHalf}) {
      for (int open = 0; open < 32; ++open) {
        for (const BuildFlags& build : {kThisBuild, none, all}) {
          out.push_back({device, dtype, (open & 1) != 0, (open & 2) != 0, build, (open & 4) != 0,
                         (open & 8) != 0, (open & 16) != 0});
        }
      }
    }
  }
  return out;
}

bool fast(const KernelContext& c) {
  return c.device.is_cuda() && c.dtype != at::kDouble;
}

TEST(KernelTable, AttentionIsKvCacheThenRingThenFusedThenBlockedThenExplicit) {
  for (const KernelContext& c : every_context()) {
    AttentionPathId expected = AttentionPathId::kExplicit;
    if (c.kv_cache) {
      expected = AttentionPathId::kKvCache;
    } else if (c.cp_ring) {
      expected = AttentionPathId::kCpRing;
    } else if (c.build.fused_attention && fast(c)) {
      expected = AttentionPathId::kFused;
    } else if (c.dtype != at::kDouble) {
      expected = AttentionPathId::kBlocked;
    }
    EXPECT_EQ(choose(kAttentionPaths, c).id, expected) << describe(c);
  }
}

TEST(KernelTable, NoLocalAttentionKernelRunsUnderARingOrACache) {
  // The fused kernel once ran ahead of the ring: it attended within this rank's tokens only.
  for (const KernelContext& c : every_context()) {
    if (!c.kv_cache && !c.cp_ring) continue;
    const AttentionPath& path = choose(kAttentionPaths, c);
    EXPECT_TRUE(path.id == AttentionPathId::kKvCache || path.id == AttentionPathId::kCpRing)
        << path.name << " for " << describe(c);
  }
}

TEST(KernelTable, AdamWLinearAndMatmulPrecisionOrders) {
  for (const KernelContext& c : every_context()) {
    EXPECT_EQ(choose(kAdamWPaths, c).id,
              c.build.fused_adamw && fast(c) ? AdamWPathId::kFused : AdamWPathId::kForeach)
        << describe(c);
    EXPECT_EQ(choose(kLinearPaths, c).id,
              c.device.is_cuda() ? LinearPathId::kAtLinear : LinearPathId::kMmAdd)
        << describe(c);
    EXPECT_EQ(choose(kMatmulPrecisionPaths, c).id,
              c.build.tf32_control && c.device.is_cuda() && c.dtype == at::kFloat
                  ? MatmulPrecisionId::kTf32
                  : MatmulPrecisionId::kFloat32)
        << describe(c);
  }
}

TEST(KernelTable, LossIsOurKernelThenLogSoftmaxThenWidenedThenPasses) {
  for (const KernelContext& c : every_context()) {
    const bool low = c.dtype == at::kBFloat16 || c.dtype == at::kHalf;
    // A loss mask goes pass by pass (NOTE [Loss masks]).
    const bool whole_on_cuda = c.device.is_cuda() && !c.vocab_split && !c.masked_targets;
    LossPathId expected = LossPathId::kPasses;
    if (whole_on_cuda && c.build.cuda_kernels && c.dtype != at::kDouble && c.unverified) {
      expected = LossPathId::kKernel;  // our kernel has not run on a GPU yet
    } else if (whole_on_cuda && !low) {
      expected = LossPathId::kLogSoftmax;
    } else if (whole_on_cuda && c.unverified) {  // the widened row has not run on a GPU yet
      expected = LossPathId::kWidenedLogSoftmax;
    }
    EXPECT_EQ(choose(kLossPaths, c).id, expected) << describe(c);
  }
}

// NOTE [GPU-verified]
TEST(KernelTable, ACudaRowNoGpuHasRunIsSkippedUnlessOptedIn) {
  const KernelContext bf16_on_cuda{kGpu, at::kBFloat16};
  EXPECT_FALSE(bf16_on_cuda.unverified);  // off by default
  const LossPath& widened = kLossPaths[2];
  ASSERT_EQ(widened.id, LossPathId::kWidenedLogSoftmax);
  ASSERT_EQ(widened.gpu_run.date, nullptr) << "verified on a GPU: pick another unverified row";
  EXPECT_EQ(choose(kLossPaths, bf16_on_cuda).id, LossPathId::kPasses);
  EXPECT_EQ(why_not(widened, bf16_on_cuda), kNotYetRunOnAGpu);
  const std::string device_line = fast_paths_summary(kGpu, at::kBFloat16);
  EXPECT_NE(device_line.find(std::string("widened log-softmax loss off (") + kNotYetRunOnAGpu),
            std::string::npos)
      << device_line;

  set_unverified_kernels(true);  // training.unverified_kernels = true
  KernelContext opted_in{kGpu, at::kBFloat16};
  set_unverified_kernels(false);
  EXPECT_TRUE(opted_in.unverified);
  opted_in.build.cuda_kernels = false;  // our loss kernel, unverified too, would come first
  EXPECT_EQ(choose(kLossPaths, opted_in).id, LossPathId::kWidenedLogSoftmax);
  EXPECT_TRUE(why_not(widened, opted_in).empty());
}

TEST(KernelTable, CudaRowsAreThoseNoOtherDeviceTakesAndSayTheirGpuRun) {
  const std::vector<KernelContext> contexts = every_context();
  for_each_table([&](const auto& table, const char* op) {
    EXPECT_FALSE(table.back().cuda_only) << op << ": the last row must hold everywhere";
    for (const auto& path : table) {
      const bool on_cpu = std::any_of(contexts.begin(), contexts.end(), [&](const auto& c) {
        return !c.device.is_cuda() && holds(path, c);
      });
      EXPECT_EQ(path.cuda_only, !on_cpu) << op << ": " << path.name;
      const std::string said = gpu_run_text(path.gpu_run);
      if (path.gpu_run.date != nullptr) {
        EXPECT_TRUE(path.cuda_only)
            << path.name << ": a GPU run recorded for a row any device runs";
        EXPECT_EQ(said.rfind("GPU-verified 20", 0), 0u) << said;
        EXPECT_NE(said.find("NVIDIA "), std::string::npos) << said;
      } else {
        EXPECT_EQ(said, "not yet run on a GPU");
      }
    }
  });
  // --version: a line a row, each CUDA row with its GPU run.
  const std::string version = build_summary("");
  for_each_table([&](const auto& table, const char* op) {
    for (const auto& path : table) {
      const std::string line =
          fmt::format("  {}: {}: {}", op, path.name, path.cuda_only ? "CUDA" : "any device");
      const size_t at = version.find(line);
      ASSERT_NE(at, std::string::npos) << line << " in\n" << version;
      const std::string rest = version.substr(at, version.find('\n', at) - at);
      EXPECT_EQ(rest.find(gpu_run_text(path.gpu_run)) != std::string::npos, path.cuda_only) << rest;
    }
  });
}

TEST(KernelTable, DispatchesMarkTheRowsTheyTake) {
  // This process has run other tests: only what a dispatch here must have marked is asserted.
  const at::Tensor x = at::ones({2, 3}), w = at::ones({4, 3});
  linear(x, w, at::Tensor());
  EXPECT_TRUE(kLinearPaths.back().taken.load());
  EXPECT_NE(taken_rows().find("mm + bias add"), std::string::npos) << taken_rows();
}

TEST(KernelTable, TheExplicitPathHoldsEverywhereAndAPathOffSaysWhy) {
  for_each_table([](const auto& table, const char*) {
    for (const KernelContext& c : every_context()) {
      EXPECT_TRUE(holds(table.back(), c)) << table.back().name << ", " << describe(c);
      for (const auto& path : table)
        EXPECT_EQ(holds(path, c), why_not(path, c).empty()) << path.name << ", " << describe(c);
    }
  });
}

// ---- every path against the explicit one ------------------------------------------------------

/// Tolerances of the normalised error, for one dtype's rounding; TF32 rounds float32 operands to
/// 10 bits.
double tolerance(at::ScalarType dtype, bool tf32 = false) {
  if (tf32) return 5e-3;
  if (dtype == at::kDouble) return 1e-12;
  return dtype == at::kFloat ? 2e-5 : 5e-2;
}

/// max |got - want| / max |want| over the tensors of `want` (`got` may hold fewer).
double normalised_error(const Outputs& got, const Outputs& want) {
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const at::Tensor a = got[i].to(at::kCPU).to(at::kDouble);
    const at::Tensor b = want[i].to(at::kCPU).to(at::kDouble);
    const double scale = std::max(b.abs().max().item<double>(), 1e-30);
    worst = std::max(worst, (a - b).abs().max().item<double>() / scale);
  }
  return worst;
}

/// Runs each path of `table` that holds in a context of `device` and each dtype (`open` fills
/// the context's other fields for the path) through `run` (path, device, dtype -> its outputs,
/// or none where this test cannot run it), and compares it with the table's explicit path on
/// the CPU. Prints each error; returns how many cases ran.
template <typename Path, size_t N, typename Open, typename Run>
int check_paths(const char* op, const std::array<Path, N>& table, Device device, const Open& open,
                const Run& run) {
  int ran = 0;
  for (const Path& path : table) {
    for (at::ScalarType dtype : dtypes_on(device)) {
      KernelContext context{device, dtype};
      open(path, context);
      const std::string where =
          fmt::format("[{}] {} on {} in {}", op, path.name, device.str(), c10::toString(dtype));
      if (!holds(path, context)) {
        std::printf("%s: off (%s)\n", where.c_str(), why_not(path, context).c_str());
        continue;
      }
      if (&path == &table.back() && !device.is_cuda()) {
        std::printf("%s: the reference\n", where.c_str());
        continue;
      }
      const Outputs got = run(path, device, dtype);
      if (got.empty()) continue;
      const double error = normalised_error(got, run(table.back(), kCpu, dtype));
      std::printf("%s: max |difference| / max |explicit on the CPU| = %.2e\n", where.c_str(),
                  error);
      const bool tf32 = std::string(path.name) == "TF32 matmuls";
      EXPECT_LE(error, tolerance(dtype, tf32)) << where;
      ++ran;
    }
  }
  return ran;
}

/// q, k, v and the output's gradient [B, H, T, D] in `dtype` on `device`: T = 96 fills three of
/// the blocked kernel's blocks and splits into a ring of two.
Outputs attention_inputs(Device device, at::ScalarType dtype) {
  Outputs in;
  for (int i = 0; i < 4; ++i)
    in.push_back(placed(pattern({2, 3, 96, 16}, 0.4 * (i + 1)), device, dtype));
  return in;
}

/// A kernel's output and the gradients of q, k and v (in[3]: the output's gradient).
template <typename Kernel>
Outputs with_gradients(const Kernel& kernel, const Outputs& in) {
  Outputs leaves;
  for (size_t i = 0; i < 3; ++i)
    leaves.push_back(in[i].detach().clone().requires_grad_());
  const at::Tensor out = kernel(leaves[0], leaves[1], leaves[2]);
  out.backward(in[3]);
  return {out.detach(), leaves[0].grad(), leaves[1].grad(), leaves[2].grad()};
}

/// The KV cache's path: the first half of the sequence as a prompt, then a token at a time.
/// Generation keeps no graph: the output only.
Outputs through_kv_cache(const Outputs& in) {
  const at::NoGradGuard no_grad;
  const int64_t t = in[0].size(2), prompt = t / 2;
  KvCache cache(t);
  Outputs pieces;
  for (int64_t s = 0; s < t; s += s == 0 ? prompt : 1) {
    const int64_t n = s == 0 ? prompt : 1;
    pieces.push_back(
        cache.attend(in[0].narrow(2, s, n), in[1].narrow(2, s, n), in[2].narrow(2, s, n)));
    cache.advance(n);
  }
  return {at::cat(pieces, 2)};
}

/// The ring's path over two ranks (threads over Gloo), their parts put back in sequence order.
Outputs around_a_ring(const Outputs& in) {
  constexpr int kRanks = 2;
  std::mutex mutex;
  std::vector<Outputs> parts(kRanks);
  testing::run_ranks(kRanks, [&](const comm::Group& ring) {
    Outputs mine;
    for (const at::Tensor& x : in)
      mine.push_back(sequence_part(x, 2, ring.rank(), kRanks));
    Outputs got = with_gradients(
        [&ring](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
          return ring_causal_attention(q, k, v, ring);
        },
        mine);
    std::lock_guard<std::mutex> lock(mutex);
    parts[static_cast<size_t>(ring.rank())] = std::move(got);
  });
  const at::Tensor positions = at::arange(in[0].size(2), at::kLong);
  Outputs order;
  for (int r = 0; r < kRanks; ++r)
    order.push_back(sequence_part(positions, 0, r, kRanks));
  const at::Tensor held = at::cat(order);  // the positions that the ranks' parts hold, in turn
  Outputs whole;
  for (size_t i = 0; i < parts[0].size(); ++i) {
    const at::Tensor joined = at::cat({parts[0][i], parts[1][i]}, 2);
    whole.push_back(at::empty_like(joined).index_copy_(2, held, joined));
  }
  return whole;
}

Outputs run_attention(const AttentionPath& path, Device device, at::ScalarType dtype) {
  const Outputs in = attention_inputs(device, dtype);
  switch (path.id) {
    case AttentionPathId::kKvCache:
      return through_kv_cache(in);
    case AttentionPathId::kCpRing:
      if (!device.is_cuda()) return around_a_ring(in);
      std::printf(
          "[attention] ring attention on %s: not run here (the test's ranks talk over "
          "Gloo, which this test feeds CPU tensors only)\n",
          device.str().c_str());
      return {};
    default:
      return with_gradients(path.run, in);
  }
}

/// Three AdamW steps of three parameters of different sizes: their values and moments after.
Outputs run_adamw(const AdamWPath& path, Device device, at::ScalarType dtype) {
  AdamWLists lists;
  for (int64_t i = 0; i < 3; ++i) {
    const std::vector<int64_t> shape{5 + i, 7};
    lists.params.push_back(placed(pattern(shape, 0.1 * static_cast<double>(i + 1)), device, dtype));
    lists.grads.push_back(placed(pattern(shape, 0.7 * static_cast<double>(i + 1)), device, dtype));
    lists.exp_avgs.push_back(at::zeros_like(lists.params.back()));
    lists.exp_avg_sqs.push_back(at::zeros_like(lists.params.back()));
  }
  for (int64_t step = 1; step <= 3; ++step)
    path.run(lists, AdamWHyper{1e-2, 0.9, 0.95, 1e-8, 0.1, step});
  Outputs out = lists.params;
  out.insert(out.end(), lists.exp_avgs.begin(), lists.exp_avgs.end());
  out.insert(out.end(), lists.exp_avg_sqs.begin(), lists.exp_avg_sqs.end());
  return out;
}

/// x w^T + b with its gradients for a 3-D x, then without a bias, then for a 1-D x.
Outputs run_linear(const LinearPath& path, Device device, at::ScalarType dtype) {
  auto make = [&](std::vector<int64_t> shape, double phase) {
    return placed(pattern(shape, phase), device, dtype);
  };
  const at::Tensor x = make({4, 6, 32}, 0.3), w = make({24, 32}, 0.5), b = make({24}, 0.9);
  Outputs out = with_gradients(path.run, {x, w, b, make({4, 6, 24}, 0.2)});
  out.push_back(path.run(x, w, at::Tensor()));
  out.push_back(path.run(make({32}, 0.4), w, b));
  return out;
}

/// A float32 matmul under the path's precision; LibTorch's default ("highest") again after.
Outputs run_matmul(const MatmulPrecisionPath& path, Device device, at::ScalarType dtype) {
  at::Context& context = at::globalContext();
  context.setFloat32MatmulPrecision("highest");
  if (path.run != nullptr) path.run();
  const at::Tensor a = placed(pattern({64, 96}, 0.3), device, dtype);
  const at::Tensor b = placed(pattern({96, 48}, 0.6), device, dtype);
  const at::Tensor out = at::matmul(a, b);
  context.setFloat32MatmulPrecision("highest");
  return {out};
}

/// A chunk's loss and its logits' gradient by a loss row (NOTE [Fused LM loss]): 40 columns, 6
/// of them padding, targets among the real ones; then 5,000 columns (a row longer than a CUDA
/// block's threads, not a multiple of them) with a large logit at each target.
Outputs run_loss(const LossPath& path, Device device, at::ScalarType dtype) {
  const at::ScalarType acc = dtype == at::kDouble ? at::kDouble : at::kFloat;
  Outputs out;
  for (const auto& [rows, columns] : {std::pair<int64_t, int64_t>{12, 40}, {5, 5000}}) {
    local::VocabSlice vocab;
    vocab.real = columns == 40 ? columns - 6 : columns;
    const at::Tensor targets = at::arange(rows, at::kLong).mul(5).remainder(vocab.real);
    at::Tensor logits = pattern({rows, vocab.real}, 0.8).mul(4);
    if (columns > 40) {
      logits.scatter_(1, targets.unsqueeze(1), 9.0);
      // Masked logits first in a row: each CUDA thread's first elements are -inf.
      logits[1].narrow(0, 100, 600).fill_(-std::numeric_limits<double>::infinity());
    }
    const local::LossChunk c = local::loss_chunk(path.id, placed(logits, device, dtype),
                                                 targets.to(device), vocab, acc, 24.0, true);
    out.push_back(c.loss);
    out.push_back(c.grad);
  }
  return out;
}

/// SwiGLU's product and its gradients for [6, 40] gate and up.
Outputs run_swiglu(const SwigluPath& path, Device device, at::ScalarType dtype) {
  const auto make = [&](double phase) {
    return placed(pattern({6, 40}, phase).mul(3), device, dtype).requires_grad_();
  };
  const at::Tensor gate = make(0.3), up = make(0.7);
  const at::Tensor out = path.run(gate, up);
  out.backward(placed(pattern({6, 40}, 0.2), device, dtype));
  return {out.detach(), gate.grad(), up.grad()};
}

/// Rotary embedding of [2, 3, 24, 16] at positions 1000.. (angles far from 0) and its gradient.
Outputs run_rotary(const RotaryPath& path, Device device, at::ScalarType dtype) {
  const at::Tensor x = placed(pattern({2, 3, 24, 16}, 0.4), device, dtype).requires_grad_();
  const at::Tensor positions = at::arange(1000, 1024, at::dtype(at::kLong).device(device));
  const at::Tensor out = path.run(x, 10000.0, positions);
  out.backward(placed(pattern({2, 3, 24, 16}, 0.9), device, dtype));
  return {out.detach(), x.grad()};
}

/// x + delta and its LayerNorm (with a bias) or RMSNorm (without), and the gradients of x,
/// delta, the weight and the bias for gradients of both outputs: 24 rows of 48 columns, then 600
/// rows of 320 (more rows than the CUDA backward's 512 blocks, a row longer than a block).
Outputs run_add_norm(const AddNormPath& path, Device device, at::ScalarType dtype) {
  const auto make = [&](std::vector<int64_t> shape, double phase, double scale) {
    return placed(pattern(shape, phase).mul(scale), device, dtype).requires_grad_();
  };
  Outputs out;
  for (const std::vector<int64_t>& shape :
       {std::vector<int64_t>{4, 6, 48}, std::vector<int64_t>{2, 300, 320}}) {
    for (const NormKind kind : {NormKind::kLayerNorm, NormKind::kRmsNorm}) {
      const bool layer_norm = kind == NormKind::kLayerNorm;
      const int64_t c = shape.back();
      const at::Tensor x = make(shape, 0.3, 2), delta = make(shape, 0.7, 1);
      const at::Tensor w = make({c}, 0.5, 1).add(1).detach().requires_grad_();
      const at::Tensor b = layer_norm ? make({c}, 0.9, 0.5) : at::Tensor();
      const auto [sum, normed] = path.run(kind, x, delta, w, b, 1e-5);
      torch::autograd::backward({sum, normed}, {placed(pattern(shape, 0.2), device, dtype),
                                                placed(pattern(shape, 0.6), device, dtype)});
      for (const at::Tensor& t : {sum.detach(), normed.detach(), x.grad(), delta.grad(), w.grad()})
        out.push_back(t);
      if (layer_norm) out.push_back(b.grad());
    }
  }
  return out;
}

/// A mixture's local experts on rows ordered by expert, by `run` (ExpertsFn's contract), with the
/// gradients of the rows and of every weight, grad_scale 0.5: 4 experts taking 10, 0, 20 and 7
/// rows of 24 columns (one expert without rows); 4 taking 70, 0, 130 and 3 rows of 96 (more than a
/// CUDA tile's 64 rows and 32-deep steps, not multiples of them); 130 small experts of 0 to 2
/// rows (more groups than one launch of the kernel takes); 3 experts of 5, 0 and 9 rows with rank-3
/// adapters on w1, w3 and w2 (LoRA), whose gradients are outputs too.
template <typename Run>
Outputs experts_outputs(const Run& run, Device device, at::ScalarType dtype) {
  struct Case {
    std::vector<int64_t> counts;
    int64_t columns, inner;
    int64_t rank = 0;
  };
  std::vector<int64_t> many;
  for (int64_t e = 0; e < 130; ++e)
    many.push_back(e % 3);
  Outputs out;
  for (const Case& c : {Case{{10, 0, 20, 7}, 24, 40}, Case{{70, 0, 130, 3}, 96, 80},
                        Case{many, 16, 8}, Case{{5, 0, 9}, 24, 40, 3}}) {
    const auto make = [&](std::vector<int64_t> shape, double phase) {
      return placed(pattern(shape, phase), device, dtype).requires_grad_();
    };
    int64_t rows = 0;
    for (const int64_t n : c.counts)
      rows += n;
    const at::Tensor h = make({rows, c.columns}, 0.3);
    std::vector<ExpertWeights> experts;
    for (size_t e = 0; e < c.counts.size(); ++e) {
      const double phase = 0.1 * static_cast<double>(e + 1);
      experts.push_back({make({c.inner, c.columns}, phase), make({c.inner, c.columns}, phase + 0.4),
                         make({c.columns, c.inner}, phase + 0.8)});
      if (c.rank == 0) continue;
      const auto adapter = [&](int64_t out, int64_t in, double at) {
        return ExpertAdapter{make({c.rank, in}, at), make({out, c.rank}, at + 0.05), 1.5};
      };
      experts.back().lora1 = adapter(c.inner, c.columns, phase + 0.1);
      experts.back().lora3 = adapter(c.inner, c.columns, phase + 0.2);
      experts.back().lora2 = adapter(c.columns, c.inner, phase + 0.3);
    }
    const at::Tensor y = run(h, at::tensor(c.counts, at::kLong).to(device), experts, 0.5);
    y.backward(placed(pattern({rows, c.columns}, 0.6), device, dtype));
    out.push_back(y.detach());
    out.push_back(h.grad());
    for (const ExpertWeights& e : experts) {
      for (const at::Tensor& w : {e.w1, e.w3, e.w2})
        out.push_back(w.grad());
      for (const ExpertAdapter* lora : {&e.lora1, &e.lora3, &e.lora2}) {
        if (!lora->on()) continue;
        out.push_back(lora->a.grad());
        out.push_back(lora->b.grad());
      }
    }
  }
  return out;
}

Outputs run_experts_path(const ExpertsPath& path, Device device, at::ScalarType dtype) {
  return experts_outputs(path.run, device, dtype);
}

/// The tables, by the names the CUDA tests take (KernelTableOnCuda).
const char* const kTables[] = {"Attention", "AdamW",  "Linear",  "MatmulPrecision", "LmLoss",
                               "Swiglu",    "Rotary", "AddNorm", "MoeExperts"};

/// Runs every path of table `name` (one of kTables) on `device`; returns how many cases ran.
int check_table(const std::string& name, Device device) {
  auto nothing_open = [](const auto&, KernelContext&) {};
  // Every loss row runs here, the ones no GPU has run too (NOTE [GPU-verified]); so do our own
  // CUDA kernels (NOTE [CUDA kernels]).
  auto unverified_open = [](const auto&, KernelContext& context) { context.unverified = true; };
  auto attention_open = [](const AttentionPath& path, KernelContext& context) {
    context.kv_cache = path.id == AttentionPathId::kKvCache;
    context.cp_ring = path.id == AttentionPathId::kCpRing;
  };
  if (name == "Attention")
    return check_paths("attention", kAttentionPaths, device, attention_open, run_attention);
  if (name == "AdamW") return check_paths("AdamW", kAdamWPaths, device, nothing_open, run_adamw);
  if (name == "Linear")
    return check_paths("linear", kLinearPaths, device, nothing_open, run_linear);
  if (name == "MatmulPrecision")
    return check_paths("matmul", kMatmulPrecisionPaths, device, nothing_open, run_matmul);
  if (name == "LmLoss")
    return check_paths("LM loss", kLossPaths, device, unverified_open, run_loss);
  if (name == "Swiglu")
    return check_paths("SwiGLU", kSwigluPaths, device, unverified_open, run_swiglu);
  if (name == "Rotary")
    return check_paths("rotary", kRotaryPaths, device, unverified_open, run_rotary);
  if (name == "AddNorm")
    return check_paths("residual add + norm", kAddNormPaths, device, unverified_open, run_add_norm);
  if (name == "MoeExperts")
    return check_paths("MoE experts", kExpertsPaths, device, unverified_open, run_experts_path);
  ADD_FAILURE() << "no table " << name;
  return 0;
}

TEST(KernelTable, EveryPathMatchesTheExplicitOneOnTheCpu) {
  int ran = 0;
  for (const char* name : kTables)
    ran += check_table(name, kCpu);
  EXPECT_GT(ran, 0);
}

/// NOTE [Kernel tests a process each]: on CUDA, a test a table, so that scripts/gpu-check.sh runs
/// each kernel's rows in a process of its own (a sticky CUDA error, an illegal address, ends the
/// process that met it and no other) and a failure names its kernel.
class KernelTableOnCuda : public ::testing::TestWithParam<const char*> {};

TEST_P(KernelTableOnCuda, EveryPathMatchesTheExplicitOne) {
  if (!at::hasCUDA())
    GTEST_SKIP() << "no GPU: the CUDA paths (fused attention and AdamW where LibTorch has them, "
                    "at::linear, TF32 matmuls, the log-softmax losses, our SwiGLU, rotary, LM "
                    "loss and residual add + norm kernels and grouped GEMM where nvcc built them) "
                    "run where one is";
  EXPECT_GT(check_table(GetParam(), kGpu), 0) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(Tables, KernelTableOnCuda, ::testing::ValuesIn(kTables),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

// NOTE [Grouped experts]: the grouped row's autograd composition with the reference GEMMs, on the
// CPU: its values and every gradient are the one-by-one row's.
TEST(KernelTable, GroupedExpertsMatchOneByOneWithTheReferenceGemms) {
  const auto grouped = [](const at::Tensor& h, const at::Tensor& counts,
                          const std::vector<ExpertWeights>& experts, double grad_scale) {
    return grouped_experts(h, counts, experts, grad_scale, kReferenceGemm);
  };
  for (at::ScalarType dtype : {at::kDouble, at::kFloat}) {
    const double error = normalised_error(experts_outputs(grouped, kCpu, dtype),
                                          experts_outputs(local::run_experts, kCpu, dtype));
    std::printf(
        "[MoE experts] grouped, reference GEMMs, in %s: max |difference| / max |one by one| "
        "= %.2e\n",
        c10::toString(dtype), error);
    EXPECT_LE(error, tolerance(dtype)) << c10::toString(dtype);
  }
}

// NOTE [Group ends on the device]: the host reads the groups' ends where it computes with them
// (the reference GEMMs, the one-by-one row) and refuses ends that miss the rows, M - 1 or M + 1
// or decreasing, naming them; the CUDA kernels, which read them on the device, hold them within
// the rows instead (tests/kernels/cuda_kernels_test.cpp).
TEST(KernelTable, GroupEndsThatMissTheRowsAreRefusedOnTheHost) {
  const int64_t rows = 10;
  const at::Tensor x = pattern({rows, 8}, 0.3), dy = pattern({rows, 4}, 0.6);
  const std::vector<at::Tensor> w(3, pattern({4, 8}, 0.5));
  struct Case {
    std::vector<int64_t> ends;
    const char* says;
  };
  for (const Case& c :
       {Case{{3, 5, 9}, "groups of 9 rows for 10"}, Case{{3, 5, 11}, "groups of 11 rows for 10"},
        Case{{3, 2, 10}, "the groups' ends decrease (2 after 3)"}}) {
    const at::Tensor ends = at::tensor(c.ends, at::kLong);
    EXPECT_NE(error_of([&] { kReferenceGemm.mm(x, ends, w, true); }).find(c.says),
              std::string::npos)
        << c.says;
    EXPECT_NE(error_of([&] { kReferenceGemm.weight_grads(dy, x, ends); }).find(c.says),
              std::string::npos)
        << c.says;
  }
  EXPECT_EQ(error_of([&] {
              kReferenceGemm.mm(x, at::tensor({3, 5, 10}, at::kLong), w, true);
            }),
            "");

  std::vector<ExpertWeights> experts;
  for (int e = 0; e < 3; ++e)
    experts.push_back({pattern({6, 8}, 0.1 * e), pattern({6, 8}, 0.2 * e), pattern({8, 6}, 0.3)});
  for (const auto& [counts, says] :
       {std::pair<std::vector<int64_t>, const char*>{{3, 2, 4}, "counts of 9 rows for 10"},
        {{3, 2, 6}, "counts of 11 rows for 10"},
        {{3, -1, 8}, "expert 1 takes -1 rows"}}) {
    const at::Tensor n = at::tensor(counts, at::kLong);
    EXPECT_NE(error_of([&] { local::run_experts(x, n, experts, 1.0); }).find(says),
              std::string::npos)
        << says;
    EXPECT_NE(error_of([&] { grouped_experts(x, n, experts, 1.0, kReferenceGemm); }), "") << says;
  }
}

}  // namespace
}  // namespace vescale::kernels
