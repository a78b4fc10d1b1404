// Every op rule against the single-device op in float64, forward and backward, on 2 and 4 ranks,
// for each supported placement combination (and some that need redistribution).
#include "dtensor/ops.h"
#include "parallel/grad_sync.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>

#include "core/error.h"
#include "kernels/kernel_table.h"
#include "support/expect_close.h"
#include "support/run_ranks.h"
#include "support/tensors.h"

namespace vescale {
namespace {

using testing::box_of;
using testing::expect_close;
using testing::pattern;
using testing::run_ranks;

/// One input of an op case: a float tensor (differentiable) or integer ids below `modulo`.
struct Input {
  std::vector<int64_t> shape;
  int64_t modulo = 0;  // > 0: integer ids
  double offset = 0;   // added to float values (e.g. keep divisors away from 0)
};

struct OpCase {
  std::string name;
  std::vector<Input> inputs;
  std::function<DTensor(const std::vector<DTensor>&)> dist;
  std::function<at::Tensor(const std::vector<at::Tensor>&)> ref;
  std::vector<std::string> combos;  // placements per input, "S(0) R S(0)"
};

at::Tensor make_input(const Input& in, int index) {
  if (in.modulo > 0) {
    return (at::arange(c10::multiply_integers(in.shape), at::kLong) * 7 + index)
        .remainder(in.modulo)
        .view(in.shape);
  }
  return pattern(in.shape, 0.3 + index) + in.offset;
}

std::vector<std::string> split_words(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream stream(s);
  for (std::string w; stream >> w;)
    out.push_back(w);
  return out;
}

/// Runs one case for one placement combo; returns the max relative error on this rank.
double check_case(const DeviceMesh& mesh, const OpCase& c, const std::string& combo) {
  const std::string label = fmt::format("{} with [{}] on tp={}", c.name, combo, mesh.size(0));
  const auto words = split_words(combo);
  std::vector<at::Tensor> ref_inputs;
  std::vector<DTensor> inputs;
  for (size_t j = 0; j < c.inputs.size(); ++j) {
    at::Tensor full = make_input(c.inputs[j], static_cast<int>(j));
    DTensor d = distribute_tensor(full, mesh, {Placement::parse(words[j])});
    at::Tensor local = d.to_local().detach().clone();
    if (c.inputs[j].modulo == 0) {
      full.requires_grad_(true);
      local.requires_grad_(true);
    }
    ref_inputs.push_back(full);
    inputs.emplace_back(local, d.spec());
  }
  at::Tensor expected = c.ref(ref_inputs);
  const at::Tensor w = pattern(expected.sizes().vec(), 4.1);
  (expected * w).sum().backward();

  DTensor out = c.dist(inputs);
  Placements reduced = out.placements();
  for (auto& p : reduced) {
    if (p.is_partial()) p = Placement::replicate();
  }
  DTensor result = out.redistribute(reduced);
  double err = expect_close(result.to_local(), box_of(expected.detach(), result.spec()), 1e-12,
                            1e-13, label);
  (result.to_local() * box_of(w, result.spec())).sum().backward();
  for (size_t j = 0; j < inputs.size(); ++j) {
    if (c.inputs[j].modulo > 0) continue;
    const at::Tensor& g = inputs[j].to_local().grad();
    const at::Tensor reference = box_of(ref_inputs[j].grad(), inputs[j].spec());
    if (!g.defined()) {
      EXPECT_EQ(reference.abs().max().item<double>(), 0.0)
          << label << " input " << j << " has no grad";
      continue;
    }
    err = std::max(err, expect_close(g, reference, 1e-12, 1e-13,
                                     fmt::format("{} grad of input {}", label, j)));
  }
  return err;
}

std::vector<OpCase> all_cases() {
  const RngKey key{1234, stream_id("dropout-test")};
  return {
      {"linear",
       {{{3, 5, 8}}, {{6, 8}}, {{6}}},
       [](const auto& d) { return ops::linear(d[0], d[1], d[2]); },
       [](const auto& t) { return at::linear(t[0], t[1], t[2]); },
       {"R S(0) S(0)", "S(-1) S(1) R", "S(0) R R", "S(1) R R", "R R R", "R S(0) R", "S(-1) S(0) R",
        "S(2) R R"}},
      {"linear_no_bias",
       {{{4, 8}}, {{6, 8}}},
       [](const auto& d) { return ops::linear(d[0], d[1]); },
       [](const auto& t) { return at::linear(t[0], t[1]); },
       {"R S(0)", "S(1) S(1)", "S(0) R"}},
      {"matmul",
       {{{2, 4, 5, 6}}, {{2, 4, 6, 3}}},
       [](const auto& d) { return ops::matmul(d[0], d[1]); },
       [](const auto& t) { return at::matmul(t[0], t[1]); },
       {"S(1) S(1)", "S(2) R", "R S(3)", "S(3) S(2)", "S(0) R", "R R", "S(3) R"}},
      {"add_broadcast",
       {{{5, 6}}, {{6}}},
       [](const auto& d) { return ops::add(d[0], d[1]); },
       [](const auto& t) { return t[0] + t[1]; },
       {"S(0) R", "S(1) S(0)", "R R", "S(1) R", "R S(0)"}},
      {"sub",
       {{{5, 6}}, {{5, 6}}},
       [](const auto& d) { return ops::sub(d[0], d[1]); },
       [](const auto& t) { return t[0] - t[1]; },
       {"S(0) S(0)", "S(0) S(1)", "R S(1)"}},
      {"mul_broadcast",
       {{{5, 6}}, {{6}}},
       [](const auto& d) { return ops::mul(d[0], d[1]); },
       [](const auto& t) { return t[0] * t[1]; },
       {"S(0) R", "S(1) S(0)", "R R"}},
      {"div",
       {{{5, 6}}, {{5, 6}, 0, 2.0}},
       [](const auto& d) { return ops::div(d[0], d[1]); },
       [](const auto& t) { return t[0] / t[1]; },
       {"S(0) S(0)", "S(1) R", "R R"}},
      {"scale_and_add_scalar",
       {{{5, 6}}},
       [](const auto& d) { return ops::add_scalar(ops::scale(d[0], -1.5), 0.25); },
       [](const auto& t) { return t[0] * -1.5 + 0.25; },
       {"S(0)", "S(1)", "R"}},
      {"gelu",
       {{{5, 6}}},
       [](const auto& d) { return ops::gelu(d[0]); },
       [](const auto& t) { return at::gelu(t[0]); },
       {"S(0)", "S(1)", "R"}},
      {"dropout",
       {{{7, 6}}},
       [key](const auto& d) { return ops::dropout(d[0], 0.3, key, true); },
       [key](const auto& t) {
         return t[0] * keep_mask(key, Box::whole({7, 6}), 0.7).to(at::kDouble) / 0.7;
       },
       {"S(0)", "S(1)", "R"}},
      {"layer_norm",
       {{{3, 5, 8}}, {{8}}, {{8}}},
       [](const auto& d) { return ops::layer_norm(d[0], d[1], d[2], 1e-5); },
       [](const auto& t) { return at::layer_norm(t[0], {8}, t[1], t[2], 1e-5); },
       {"S(0) R R", "S(1) R R", "R R R", "S(2) R R"}},
      // NOTE [Residual add and norm]: both outputs used, so both carry gradients; S(2) (the
      // normalised dim) and "S(1) S(0)" take the two ops instead of the fused one.
      {"add_layer_norm",
       {{{3, 5, 8}}, {{3, 5, 8}}, {{8}}, {{8}}},
       [](const auto& d) {
         const auto [sum, normed] = ops::add_layer_norm(d[0], d[1], d[2], d[3], 1e-5);
         return ops::add(sum, normed);
       },
       [](const auto& t) {
         const at::Tensor sum = t[0] + t[1];
         return sum + at::layer_norm(sum, {8}, t[2], t[3], 1e-5);
       },
       {"S(0) S(0) R R", "S(1) S(1) R R", "R R R R", "S(1) R R R", "S(2) S(2) R R",
        "S(1) S(0) R R"}},
      {"add_rms_norm",
       {{{3, 5, 8}}, {{3, 5, 8}}, {{8}}},
       [](const auto& d) {
         const auto [sum, normed] = ops::add_rms_norm(d[0], d[1], d[2], 1e-5);
         return ops::add(sum, normed);
       },
       [](const auto& t) {
         const at::Tensor sum = t[0] + t[1];
         return sum + sum * at::rsqrt(sum.pow(2).mean(-1, true) + 1e-5) * t[2];
       },
       {"S(0) S(0) R", "S(1) S(1) R", "R R R", "R S(1) R", "S(2) R R"}},
      {"silu",
       {{{5, 6}}},
       [](const auto& d) { return ops::silu(d[0]); },
       [](const auto& t) { return t[0] * at::sigmoid(t[0]); },
       {"S(0)", "S(1)", "R"}},
      {"swiglu",
       {{{5, 6}}, {{5, 6}}},
       [](const auto& d) { return ops::swiglu(d[0], d[1]); },
       [](const auto& t) { return t[0] * at::sigmoid(t[0]) * t[1]; },
       {"S(0) S(0)", "S(1) S(1)", "R R", "S(0) R"}},
      {"rms_norm",
       {{{3, 5, 8}}, {{8}}},
       [](const auto& d) { return ops::rms_norm(d[0], d[1], 1e-5); },
       [](const auto& t) { return t[0] * at::rsqrt(t[0].pow(2).mean(-1, true) + 1e-5) * t[1]; },
       {"S(0) R", "S(1) R", "R R", "S(2) R"}},
      {"rotary",
       {{{2, 4, 5, 6}}},
       [](const auto& d) { return ops::rotary(d[0], 500.0); },
       [](const auto& t) {
         // Pair (i, i + 3) of position p turned by p * 500^(-2i/6), written out by hand.
         const at::Tensor x = t[0];
         at::Tensor out = at::empty_like(x);
         for (int64_t p = 0; p < 5; ++p) {
           for (int64_t i = 0; i < 3; ++i) {
             const double a = static_cast<double>(p) * std::pow(500.0, -2.0 * i / 6.0);
             const at::Tensor lo = x.select(2, p).select(-1, i);
             const at::Tensor hi = x.select(2, p).select(-1, i + 3);
             out.select(2, p).select(-1, i).copy_(lo * std::cos(a) - hi * std::sin(a));
             out.select(2, p).select(-1, i + 3).copy_(hi * std::cos(a) + lo * std::sin(a));
           }
         }
         return out;
       },
       {"S(0)", "S(1)", "S(2)", "S(3)", "R"}},
      {"repeat_heads",
       {{{2, 4, 5, 3}}},
       [](const auto& d) { return ops::repeat_heads(d[0], 2); },
       [](const auto& t) { return t[0].repeat_interleave(2, 1); },
       {"S(1)", "S(0)", "S(2)", "S(3)", "R"}},
      {"softmax",
       {{{5, 7}}},
       [](const auto& d) { return ops::softmax(d[0], -1); },
       [](const auto& t) { return at::softmax(t[0], -1); },
       {"S(0)", "S(1)", "R"}},
      {"causal_attention",
       {{{2, 4, 5, 3}}, {{2, 4, 5, 3}}, {{2, 4, 5, 3}}},
       [](const auto& d) { return ops::causal_attention(d[0], d[1], d[2]); },
       [](const auto& t) {
         at::Tensor s = at::matmul(t[0], t[1].transpose(-2, -1)) / std::sqrt(3.0);
         s = s.masked_fill(at::ones({5, 5}, at::kBool).triu(1), -INFINITY);
         return at::matmul(at::softmax(s, -1), t[2]);
       },
       {"S(1) S(1) S(1)", "S(0) S(0) S(0)", "R R R", "S(2) R R"}},
      {"embedding",
       {{{3, 5}, 11}, {{11, 4}}},
       [](const auto& d) { return ops::embedding(d[0], d[1]); },
       [](const auto& t) { return at::embedding(t[1], t[0]); },
       {"R S(0)", "R S(1)", "S(0) R", "R R", "S(1) S(0)"}},
      {"cross_entropy",
       {{{6, 11}}, {{6}, 11}},
       [](const auto& d) { return ops::cross_entropy(d[0], d[1]); },
       [](const auto& t) { return at::cross_entropy_loss(t[0], t[1]); },
       {"S(1) R", "S(0) S(0)", "S(0) R", "R R", "R S(0)"}},
      {"reshape_split",
       {{{4, 6, 8}}},
       [](const auto& d) {
         return ops::reshape(d[0], {4, 6, 2, 4});
       },
       [](const auto& t) {
         return t[0].reshape({4, 6, 2, 4});
       },
       {"S(2)", "S(0)", "S(1)", "R"}},
      {"reshape_merge",
       {{{4, 6, 8}}},
       [](const auto& d) {
         return ops::reshape(d[0], {24, -1});
       },
       [](const auto& t) {
         return t[0].reshape({24, 8});
       },
       {"S(0)", "S(1)", "S(2)"}},
      {"transpose",
       {{{5, 6, 3}}},
       [](const auto& d) { return ops::transpose(d[0], 0, 2); },
       [](const auto& t) { return t[0].transpose(0, 2); },
       {"S(0)", "S(1)", "S(2)", "R"}},
      {"sum",
       {{{5, 6}}},
       [](const auto& d) { return ops::sum(d[0], {0}); },
       [](const auto& t) { return t[0].sum({0}); },
       {"S(0)", "S(1)", "R"}},
      {"sum_keepdim",
       {{{5, 6}}},
       [](const auto& d) { return ops::sum(d[0], {-1}, true); },
       [](const auto& t) { return t[0].sum({-1}, true); },
       {"S(0)", "S(1)"}},
      {"mean",
       {{{5, 6}}},
       [](const auto& d) { return ops::mean(d[0]); },
       [](const auto& t) { return t[0].mean(); },
       {"S(0)", "S(1)", "R"}},
  };
}

class OpRules : public ::testing::TestWithParam<int> {};

TEST_P(OpRules, MatchSingleDeviceForwardAndBackward) {
  const int n = GetParam();
  const auto cases = all_cases();
  std::vector<double> errors(cases.size(), 0.0);
  run_ranks(n, [&](const comm::Group& world) {
    DeviceMesh mesh(world, MeshSpec{{n}, {"tp"}});
    for (size_t k = 0; k < cases.size(); ++k) {
      double worst = 0;
      for (const auto& combo : cases[k].combos)
        worst = std::max(worst, check_case(mesh, cases[k], combo));
      if (world.rank() == 0) errors[k] = worst;
    }
  });
  for (size_t k = 0; k < cases.size(); ++k) {
    std::printf("tp=%d %-22s %zu placement combos, max relative error %.3g\n", n,
                cases[k].name.c_str(), cases[k].combos.size(), errors[k]);
    EXPECT_LE(errors[k], 1e-12) << cases[k].name;
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, OpRules, ::testing::Values(2, 4),
                         [](const auto& info) { return "tp" + std::to_string(info.param); });

TEST(OpRules, LinearOnTwoByTwoMesh) {
  // Batch over dp, column-parallel over tp, then row-parallel over tp.
  run_ranks(4, [](const comm::Group& world) {
    DeviceMesh mesh(world, MeshSpec::parse("dp=2,tp=2"));
    at::Tensor x = pattern({4, 3, 8}, 0.1).requires_grad_(true);
    at::Tensor w1 = pattern({6, 8}, 0.2).requires_grad_(true);
    at::Tensor w2 = pattern({8, 6}, 0.3).requires_grad_(true);
    at::Tensor ref = at::linear(at::gelu(at::linear(x, w1)), w2);
    ref.sum().backward();
    auto leaf = [&](const at::Tensor& full, Placements p) {
      DTensor d = distribute_tensor(full.detach(), mesh, p);
      return DTensor(d.to_local().clone().requires_grad_(true), d.spec());
    };
    DTensor dx = leaf(x, {Placement::shard(0), Placement::replicate()});
    DTensor dw1 = leaf(w1, {Placement::replicate(), Placement::shard(0)});
    DTensor dw2 = leaf(w2, {Placement::replicate(), Placement::shard(1)});
    DTensor y = ops::linear(ops::gelu(ops::linear(dx, dw1)), dw2);
    EXPECT_EQ(placements_str(y.placements()), "[S(0), P]");
    DTensor yr = y.redistribute({Placement::shard(0), Placement::replicate()});
    expect_close(yr.to_local(), box_of(ref.detach(), yr.spec()), 1e-12, 1e-13, "2x2 mlp forward");
    yr.to_local().sum().backward();
    // dw1, dw2 are Replicate over dp and meet dp-sharded activations: the ops reduce their
    // gradients over dp, so each rank holds the full gradient of its tp shard.
    expect_close(dw1.to_local().grad(), box_of(w1.grad(), dw1.spec()), 1e-12, 1e-13,
                 "2x2 fc1 grad");
    expect_close(dw2.to_local().grad(), box_of(w2.grad(), dw2.spec()), 1e-12, 1e-13,
                 "2x2 fc2 grad");
    expect_close(dx.to_local().grad(), box_of(x.grad(), dx.spec()), 1e-12, 1e-13, "2x2 input grad");
  });
}

TEST(OpRules, VocabParallelCrossEntropyMovesOnlyRowSizedData) {
  const int64_t rows = 8, vocab = 64;
  for (int n : {2, 4}) {
    run_ranks(n, [&](const comm::Group& world) {
      DeviceMesh mesh(world, MeshSpec{{n}, {"tp"}});
      DTensor logits = distribute_tensor(pattern({rows, vocab}, 0.5), mesh, {Placement::shard(1)});
      DTensor targets = distribute_tensor(at::arange(rows, at::kLong) * 5 % vocab, mesh,
                                          {Placement::replicate()});
      const int64_t before = world.stats().total_bytes();
      DTensor loss = ops::cross_entropy(logits, targets);
      const int64_t bytes = world.stats().total_bytes() - before;
      // Three all-reduces of one float64 per row: max, sum of exponentials, target logit.
      const int64_t expected = 3 * (2 * (n - 1) * rows * 8 / n);
      if (world.rank() == 0) {
        std::printf(
            "vocab-parallel CE on %d ranks: %lld bytes counted, %lld analytic, full logits %lld\n",
            n, static_cast<long long>(bytes), static_cast<long long>(expected),
            static_cast<long long>(rows * vocab * 8));
      }
      EXPECT_EQ(bytes, expected);
      EXPECT_LT(bytes, rows * vocab * 8 / 4);
      EXPECT_EQ(loss.placements()[0], Placement::replicate());
    });
  }
}

}  // namespace
}  // namespace vescale

namespace vescale {
namespace {

TEST(OpRules, ReplicatedParameterKeepsPartialGradientUntilReduced) {
  // Sequence parallel: activations sharded on the sequence dim, LayerNorm weight Replicate.
  run_ranks(2, [](const comm::Group& world) {
    DeviceMesh mesh(world, MeshSpec{{2}, {"tp"}});
    at::Tensor x = pattern({2, 5, 4}, 0.1);
    at::Tensor w = (pattern({4}, 0.2) + 1).requires_grad_(true);
    at::Tensor b = pattern({4}, 0.3).requires_grad_(true);
    at::Tensor ref = at::layer_norm(x, {4}, w, b, 1e-5);
    (ref * pattern({2, 5, 4}, 0.4)).sum().backward();

    DTensor dx = distribute_tensor(x, mesh, {Placement::shard(1)});
    DTensor dw = distribute_tensor(w.detach(), mesh, {Placement::replicate()});
    DTensor db = distribute_tensor(b.detach(), mesh, {Placement::replicate()});
    dw = DTensor(dw.to_local().clone(), dw.spec());
    db = DTensor(db.to_local().clone(), db.spec());
    dw.requires_grad_();
    db.requires_grad_();
    DTensor y = ops::layer_norm(dx, dw, db, 1e-5);
    EXPECT_EQ(placements_str(y.placements()), "[S(1)]");
    (y.to_local() * box_of(pattern({2, 5, 4}, 0.4), y.spec())).sum().backward();
    EXPECT_EQ(placements_str(dw.grad().placements()), "[P]");
    EXPECT_EQ(dw.partial_grad_dims(), std::vector<int>{0});
    const int64_t before = world.stats().bytes("tp");
    GradSync(std::vector<DTensor*>{&dw, &db}, std::nullopt, 1 << 20).finish();
    EXPECT_EQ(world.stats().bytes("tp") - before, 2 * (2 * 1 * 4 * 8 / 2));
    EXPECT_EQ(placements_str(dw.grad().placements()), "[R]");
    expect_close(dw.to_local().grad(), w.grad(), 1e-12, 1e-13,
                 "sequence-parallel LayerNorm weight grad");
    expect_close(db.to_local().grad(), b.grad(), 1e-12, 1e-13,
                 "sequence-parallel LayerNorm bias grad");
  });
}

TEST(OpRules, ParameterMixingPartialAndFullGradientsIsAnError) {
  run_ranks(2, [](const comm::Group& world) {
    DeviceMesh mesh(world, MeshSpec{{2}, {"tp"}});
    DTensor w = distribute_tensor(pattern({4}, 0.2), mesh, {Placement::replicate()});
    w = DTensor(w.to_local().clone(), w.spec());
    w.requires_grad_();
    DTensor sharded = distribute_tensor(pattern({6, 4}, 0.1), mesh, {Placement::shard(0)});
    DTensor replicated = distribute_tensor(pattern({6, 4}, 0.1), mesh, {Placement::replicate()});
    ops::mul(sharded, w);
    EXPECT_THROW(ops::mul(replicated, w), Error);
  });
}

TEST(OpRules, AttentionOffCudaIsTheExplicitKernelBitwise) {
  // NOTE [Kernel table]: on the CPU, and in float64 anywhere, attention keeps the explicit kernel
  // (float32 too at this length: NOTE [Blocked causal attention] needs two blocks, and
  // local_kernels_test compares it at longer ones), and NOTE [Explicit attention]'s additive
  // mask and fused scale give the textbook values and gradients bit for bit.
  ASSERT_NE(kernels::choose(kernels::kAttentionPaths, {kCpu, at::kFloat}).id,
            kernels::AttentionPathId::kFused);
  run_ranks(1, [](const comm::Group& world) {
    DeviceMesh mesh(world, MeshSpec{{1}, {"tp"}});
    for (at::ScalarType dtype : {at::kFloat, at::kDouble}) {
      std::vector<at::Tensor> qkv, mine;
      std::vector<DTensor> d;
      for (int i = 0; i < 3; ++i) {
        qkv.push_back(pattern({2, 3, 5, 4}, 0.3 * (i + 1)).to(dtype).requires_grad_());
        mine.push_back(qkv.back().detach().clone().requires_grad_());
        d.push_back(distribute_tensor(mine.back(), mesh, {Placement::replicate()}));
      }
      at::Tensor s = at::matmul(qkv[0], qkv[1].transpose(-2, -1)) * (1.0 / std::sqrt(4.0));
      s = s.masked_fill(at::ones({5, 5}, at::kBool).triu(1), -INFINITY);
      const at::Tensor reference = at::matmul(at::softmax(s, -1), qkv[2]);
      const at::Tensor out = ops::causal_attention(d[0], d[1], d[2]).to_local();
      EXPECT_EQ(out.scalar_type(), dtype);
      EXPECT_TRUE(at::equal(out, reference)) << dtype;
      const at::Tensor upstream = pattern({2, 3, 5, 4}, 0.7).to(dtype);
      reference.backward(upstream);
      out.backward(upstream);
      for (int i = 0; i < 3; ++i)
        EXPECT_TRUE(at::equal(mine[i].grad(), qkv[i].grad())) << dtype << " input " << i;
    }
  });
}

TEST(OpRules, OutputPlacementsFollowTheRules) {
  run_ranks(2, [](const comm::Group& world) {
    DeviceMesh mesh(world, MeshSpec{{2}, {"tp"}});
    auto d = [&](std::vector<int64_t> shape, const char* p) {
      return distribute_tensor(pattern(shape, 0.5), mesh, {Placement::parse(p)});
    };
    auto ids =
        distribute_tensor(at::arange(6, at::kLong).view({2, 3}), mesh, {Placement::replicate()});
    auto out = [](const DTensor& t) { return t.placements()[0].str(); };
    EXPECT_EQ(out(ops::linear(d({3, 8}, "R"), d({6, 8}, "S(0)"), d({6}, "S(0)"))),
              "S(1)");                                                                    // column
    EXPECT_EQ(out(ops::linear(d({3, 8}, "S(1)"), d({6, 8}, "S(1)"), d({6}, "R"))), "P");  // row
    EXPECT_EQ(out(ops::linear(d({2, 3, 8}, "S(1)"), d({6, 8}, "R"))), "S(1)");  // sequence
    EXPECT_EQ(out(ops::matmul(d({2, 3, 4}, "S(2)"), d({2, 4, 5}, "S(1)"))), "P");
    EXPECT_EQ(out(ops::causal_attention(d({1, 2, 3, 4}, "S(1)"), d({1, 2, 3, 4}, "S(1)"),
                                        d({1, 2, 3, 4}, "S(1)"))),
              "S(1)");
    EXPECT_EQ(out(ops::embedding(ids, d({7, 4}, "S(0)"))), "P");
    EXPECT_EQ(out(ops::embedding(ids, d({7, 4}, "S(1)"))), "S(2)");
    EXPECT_EQ(out(ops::layer_norm(d({2, 3, 4}, "S(1)"), d({4}, "R"), d({4}, "R"), 1e-5)), "S(1)");
    EXPECT_EQ(out(ops::softmax(d({2, 3}, "S(1)"), -1)), "R");  // no rule: Replicate
    EXPECT_EQ(out(ops::sum(d({4, 3}, "S(0)"), {0})), "P");
    EXPECT_EQ(out(ops::reshape(d({2, 4, 6}, "S(2)"), {2, 4, 2, 3})), "S(2)");
    EXPECT_EQ(out(ops::transpose(d({2, 4, 6}, "S(2)"), 1, 2)), "S(1)");
    auto targets = distribute_tensor(at::arange(6, at::kLong) % 5, mesh, {Placement::replicate()});
    EXPECT_EQ(out(ops::cross_entropy(d({6, 5}, "S(0)"), targets)), "P");  // rows
    EXPECT_EQ(out(ops::cross_entropy(d({6, 5}, "S(1)"), targets)), "R");  // vocab-parallel
    EXPECT_EQ(out(ops::cross_entropy(d({6, 5}, "R"), targets)), "R");
  });
}

}  // namespace
}  // namespace vescale
