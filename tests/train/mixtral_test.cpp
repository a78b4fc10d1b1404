// The mixtral family: its router (top-k, renormalised, ties to the lower expert index), its
// dropless experts and their gradients against a per-token loop in float64, the auxiliary loss on
// a hand-made example, the loss term attached to a backward, the metrics fields, and whole float64
// runs under data parallelism, micro-batches, pipelines, ZeRO and recompute against 1 process.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "dtensor/expert_ops.h"
#include "mesh/device_mesh.h"
#include "support/expect_close.h"
#include "support/run_ranks.h"
#include "support/tensors.h"
#include "support/training_runs.h"
#include "train/metrics.h"

namespace vescale {
namespace {

using testing::expect_close;
using testing::pattern;

TEST(MixtralRouting, TopKRenormalisedTiesToLowerIndex) {
  // Row 0: experts 1 and 2 tie for the top; row 1: all four tie; row 2: 1, 2 and 3 tie for the
  // two places.
  const at::Tensor logits =
      at::tensor({1.0, 3.0, 3.0, 0.0, 2.0, 2.0, 2.0, 2.0, 0.0, 1.0, 1.0, 1.0}, at::kDouble)
          .view({3, 4});
  const at::Tensor probs = at::softmax(logits, 1);
  const ExpertRoutes routes = route_top_k(probs, 2);
  EXPECT_TRUE(at::equal(routes.experts, at::tensor({1, 2, 0, 1, 1, 2}, at::kLong).view({3, 2})))
      << routes.experts;
  expect_close(routes.weights, at::full({3, 2}, 0.5, at::kDouble), 1e-15, 0, "tied weights");
  // Unequal choices: the weights are the chosen probabilities over their sum.
  const at::Tensor p = at::tensor({0.1, 0.5, 0.15, 0.25}, at::kDouble).view({1, 4});
  const ExpertRoutes top = route_top_k(p, 2);
  EXPECT_TRUE(at::equal(top.experts, at::tensor({1, 3}, at::kLong).view({1, 2})));
  expect_close(top.weights, at::tensor({0.5 / 0.75, 0.25 / 0.75}, at::kDouble).view({1, 2}), 1e-15,
               0, "renormalised weights");
  expect_close(route_top_k(p, 4).weights.sum(1), at::ones({1}, at::kDouble), 1e-15, 0,
               "all experts: the probabilities");
}

/// The experts one token at a time: its top-k by a stable sort on the host, weighted SwiGLUs.
at::Tensor per_token_experts(const at::Tensor& x, const at::Tensor& probs, const at::Tensor& w1,
                             const at::Tensor& w3, const at::Tensor& w2, int64_t k) {
  const int64_t num_experts = probs.size(1);
  std::vector<at::Tensor> rows;
  for (int64_t n = 0; n < x.size(0); ++n) {
    const at::Tensor p = probs.detach()[n].contiguous();
    const double* values = p.data_ptr<double>();
    std::vector<int64_t> order(static_cast<size_t>(num_experts));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return values[a] > values[b]; });
    at::Tensor total = at::zeros({}, x.options());
    for (int64_t j = 0; j < k; ++j)
      total = total + probs[n][order[static_cast<size_t>(j)]];
    at::Tensor y = at::zeros({x.size(1)}, x.options());
    for (int64_t j = 0; j < k; ++j) {
      const int64_t e = order[static_cast<size_t>(j)];
      const at::Tensor inner = at::silu(at::mv(w1[e], x[n])) * at::mv(w3[e], x[n]);
      y = y + probs[n][e] / total * at::mv(w2[e], inner);
    }
    rows.push_back(y);
  }
  return at::stack(rows);
}

TEST(MixtralExperts, DroplessAndGradientsMatchPerTokenLoop) {
  const int64_t n = 12, c = 6, inner = 5, experts = 4, k = 2;
  at::Tensor logits = pattern({n, experts}, 0.1);
  logits[0] = at::tensor({0.5, 0.5, 0.5, 0.1}, at::kDouble);  // a three-way tie for two places
  logits[1] = at::tensor({3.0, 0.0, 0.0, 0.0}, at::kDouble);  // one dominant expert
  std::vector<at::Tensor> leaves = {
      pattern({n, c}, 0.2), at::softmax(logits, 1), pattern({experts, inner, c}, 0.3),
      pattern({experts, inner, c}, 0.4), pattern({experts, c, inner}, 0.5)};
  const at::Tensor g = pattern({n, c}, 0.6);
  std::vector<at::Tensor> ref = leaves, dist = leaves;
  for (auto& t : ref)
    t = t.clone().requires_grad_(true);
  for (auto& t : dist)
    t = t.clone().requires_grad_(true);
  const at::Tensor expected = per_token_experts(ref[0], ref[1], ref[2], ref[3], ref[4], k);
  (expected * g).sum().backward();
  testing::run_ranks(1, [&](const comm::Group& world) {
    const DeviceMesh mesh(world, MeshSpec{{1}, {"tp"}});
    const Placements r{Placement::replicate()};
    std::vector<DTensor> in;
    for (const auto& t : dist)
      in.push_back(distribute_tensor(t, mesh, r));
    // Each expert's weights their own tensors, as the model holds them.
    std::vector<DTensor> w;
    std::vector<ExpertParams> local;
    for (int64_t e = 0; e < experts; ++e) {
      for (int i = 2; i < 5; ++i)
        w.push_back(distribute_tensor(dist[static_cast<size_t>(i)][e], mesh, r));
    }
    for (int64_t e = 0; e < experts; ++e)
      local.push_back({&w[3 * e], &w[3 * e + 1], &w[3 * e + 2]});
    const DTensor out = ops::moe_experts(in[0], in[1], local, k, ExpertPlacement{experts});
    expect_close(out.to_local(), expected, 1e-12, 1e-14, "moe_experts vs per-token loop");
    (out.to_local() * g).sum().backward();
  });
  const char* names[] = {"x", "probs", "w1", "w3", "w2"};
  for (size_t i = 0; i < leaves.size(); ++i) {
    ASSERT_TRUE(dist[i].grad().defined()) << names[i];
    expect_close(dist[i].grad(), ref[i].grad(), 1e-12, 1e-14,
                 std::string("gradient of ") + names[i]);
  }
}

TEST(MixtralExperts, Ep2SendsRowsToTheirExpertsAndCountsTheAnalyticBytes) {
  // 2 ranks of 8 rows each, 4 experts, 2 a rank: every output row and every gradient as the
  // 1-rank op's (an expert's gradient taking 1/ep: NOTE [Expert parallelism]), and the bytes
  // over ep those the routing implies (expert_dispatch_bytes), the backward's rows again.
  const int64_t n = 16, c = 6, inner = 5, experts = 4, k = 2, ep = 2;
  at::Tensor logits = pattern({n, experts}, 0.1);
  logits[3] = at::tensor({3.0, 0.0, 0.0, 0.0}, at::kDouble);  // rows of rank 0 crowd expert 0
  logits[5] = at::tensor({3.0, 0.0, 0.0, 0.0}, at::kDouble);
  const at::Tensor x_all = pattern({n, c}, 0.2), probs_all = at::softmax(logits, 1);
  const at::Tensor g = pattern({n, c}, 0.6);
  std::vector<at::Tensor> w = {pattern({experts, inner, c}, 0.3), pattern({experts, inner, c}, 0.4),
                               pattern({experts, c, inner}, 0.5)};
  // One rank, every expert.
  std::vector<at::Tensor> ref_w;
  for (const auto& t : w)
    ref_w.push_back(t.clone().requires_grad_(true));
  const at::Tensor ref_x = x_all.clone().requires_grad_(true);
  at::Tensor expected;
  testing::run_ranks(1, [&](const comm::Group& world) {
    const DeviceMesh mesh(world, MeshSpec{{1}, {"tp"}});
    const Placements r{Placement::replicate()};
    std::vector<DTensor> d;
    for (int64_t e = 0; e < experts; ++e)
      for (const auto& t : ref_w)
        d.push_back(distribute_tensor(t[e], mesh, r));
    std::vector<ExpertParams> local;
    for (int64_t e = 0; e < experts; ++e)
      local.push_back({&d[3 * e], &d[3 * e + 1], &d[3 * e + 2]});
    const DTensor out =
        ops::moe_experts(distribute_tensor(ref_x, mesh, r), distribute_tensor(probs_all, mesh, r),
                         local, k, ExpertPlacement{experts});
    expected = out.to_local().detach();
    (out.to_local() * g).sum().backward();
  });
  // The slots each rank routes to each expert.
  std::vector<std::vector<int64_t>> counts;
  for (int64_t rank = 0; rank < ep; ++rank) {
    const at::Tensor chosen = route_top_k(probs_all.narrow(0, rank * n / ep, n / ep), k).experts;
    const at::Tensor per = at::bincount(chosen.reshape({-1}), {}, experts);
    counts.emplace_back(per.data_ptr<int64_t>(), per.data_ptr<int64_t>() + experts);
  }
  const std::vector<int64_t> forward_bytes = expert_dispatch_bytes(counts, c * 8);
  testing::run_ranks(static_cast<int>(ep), [&](const comm::Group& world) {
    const comm::Group group = world.split({{0, 1}}, "ep");
    const DeviceMesh mesh(world.split({{0}, {1}}, "tp"), MeshSpec{{1}, {"tp"}});
    const Placements r{Placement::replicate()};
    const int64_t rank = world.rank(), rows = n / ep, mine = experts / ep;
    const at::Tensor x = x_all.narrow(0, rank * rows, rows).clone().requires_grad_(true);
    std::vector<at::Tensor> leaves;
    std::vector<DTensor> d;
    for (int64_t e = rank * mine; e < (rank + 1) * mine; ++e) {
      for (const auto& t : w) {
        leaves.push_back(t[e].clone().requires_grad_(true));
        d.push_back(distribute_tensor(leaves.back(), mesh, r));
      }
    }
    std::vector<ExpertParams> local;
    for (int64_t e = 0; e < mine; ++e)
      local.push_back({&d[3 * e], &d[3 * e + 1], &d[3 * e + 2]});
    const int64_t before = group.stats().bytes("ep");
    const DTensor out =
        ops::moe_experts(distribute_tensor(x, mesh, r),
                         distribute_tensor(probs_all.narrow(0, rank * rows, rows), mesh, r), local,
                         k, ExpertPlacement{experts, &group});
    const int64_t forward = group.stats().bytes("ep") - before;
    expect_close(out.to_local(), expected.narrow(0, rank * rows, rows), 1e-13, 1e-15,
                 "ep2 rows vs 1 rank");
    (out.to_local() * g.narrow(0, rank * rows, rows)).sum().backward();
    const int64_t backward = group.stats().bytes("ep") - before - forward;
    std::printf("rank %lld: ep bytes forward %lld (analytic %lld), backward %lld\n",
                static_cast<long long>(rank), static_cast<long long>(forward),
                static_cast<long long>(forward_bytes[rank]), static_cast<long long>(backward));
    EXPECT_EQ(forward, forward_bytes[rank]);
    const int64_t count_bytes = (ep - 1) * mine * 8;
    EXPECT_EQ(backward, forward_bytes[rank] - count_bytes);
    expect_close(x.grad(), ref_x.grad().narrow(0, rank * rows, rows), 1e-13, 1e-15,
                 "gradient of x");
    for (int64_t e = 0; e < mine; ++e) {
      for (size_t i = 0; i < 3; ++i) {
        // The holder's gradient is 1/ep of the sum over the ranks' rows.
        expect_close(leaves[static_cast<size_t>(3 * e) + i].grad() * static_cast<double>(ep),
                     ref_w[i].grad()[rank * mine + e], 1e-13, 1e-15, "expert weight gradient");
      }
    }
  });
}

TEST(MixtralAuxLoss, HandMadeExample) {
  // 2 sequences of 2 tokens, 2 experts, top-1. Sequence 0 sends both tokens to expert 0:
  // f = (1, 0), P = (0.75, 0.25), 2 x 0.75 = 1.5. Sequence 1 one to each: f = (0.5, 0.5),
  // P = (0.45, 0.55), 2 x 0.5 = 1. The mean: 1.25.
  const at::Tensor probs = at::tensor({0.9, 0.1, 0.6, 0.4, 0.2, 0.8, 0.7, 0.3}, at::kDouble)
                               .view({2, 2, 2})
                               .requires_grad_(true);
  const at::Tensor experts = at::tensor({0, 0, 1, 0}, at::kLong).view({2, 2, 1});
  const at::Tensor aux = moe_aux_loss(probs, experts);
  EXPECT_NEAR(aux.item<double>(), 1.25, 1e-15);
  // Per sequence, then the mean: the two halves of the batch average to the whole.
  const double halves = (moe_aux_loss(probs.narrow(0, 0, 1), experts.narrow(0, 0, 1)) +
                         moe_aux_loss(probs.narrow(0, 1, 1), experts.narrow(0, 1, 1)))
                            .item<double>() /
                        2.0;
  EXPECT_NEAR(halves, 1.25, 1e-15);
  // The gradient reaches P only: E f_e / (T S) = f_e / 2.
  aux.backward();
  expect_close(
      probs.grad(),
      at::tensor({0.5, 0.0, 0.5, 0.0, 0.25, 0.25, 0.25, 0.25}, at::kDouble).view({2, 2, 2}), 1e-15,
      1e-15, "aux loss gradient");
}

TEST(MixtralAuxLoss, AttachedLossAddsItsGradient) {
  const at::Tensor x = at::tensor({1.0, -2.0, 3.0}, at::kDouble).requires_grad_(true);
  const at::Tensor y = attach_loss(x * 2.0, (x * x).sum(), 0.5);
  expect_close(y.detach(), at::tensor({2.0, -4.0, 6.0}, at::kDouble), 0, 0, "value unchanged");
  y.sum().backward();
  // d/dx of sum(2x) + 0.5 sum(x^2) = 2 + x.
  expect_close(x.grad(), at::tensor({3.0, 0.0, 5.0}, at::kDouble), 1e-15, 0, "attached grad");
}

TEST(MixtralMetrics, FieldsOnlyForExperts) {
  StepMetrics m;
  m.step = 1;
  m.total_steps = 2;
  EXPECT_EQ(format_metrics_line(m).find("aux_loss"), std::string::npos);
  EXPECT_EQ(metrics_json(m).find("aux_loss"), std::string::npos);
  m.aux_loss = 1.0312;
  m.expert_load_max_over_mean = 1.25;
  EXPECT_NE(format_metrics_line(m).find("| aux_loss 1.0312 | expert load max/mean 1.25 |"),
            std::string::npos)
      << format_metrics_line(m);
  EXPECT_NE(metrics_json(m).find("\"aux_loss\":1.0312,\"expert_load_max_over_mean\":1.25"),
            std::string::npos)
      << metrics_json(m);
}

/// A Mixtral run logging every step's auxiliary loss.
testing::RunOutput moe_train(std::vector<std::string> overrides) {
  overrides.push_back("metrics.log_interval=1");
  return testing::train(testing::kMixtralRun, std::move(overrides));
}

const testing::RunOutput& mixtral_reference() {
  static const testing::RunOutput ref = moe_train({});
  return ref;
}

TEST(Mixtral, Dp2MatchesOneProcess) {
  testing::expect_matches(moe_train({"parallel.dp=2"}), mixtral_reference(),
                          "mixtral dp2 (4 micro-batches)");
}

TEST(Mixtral, Pp2Dp2Zero3AndRecomputeMatchOneProcess) {
  testing::expect_matches(moe_train({"parallel.pp=2", "parallel.dp=2"}), mixtral_reference(),
                          "mixtral pp2 x dp2 (1f1b)");
  testing::expect_matches(moe_train({"parallel.dp=2", "parallel.zero=3"}), mixtral_reference(),
                          "mixtral dp2 zero 3");
  testing::expect_matches(moe_train({"parallel.dp=2", "training.activation_checkpoint=\"full\""}),
                          mixtral_reference(), "mixtral dp2 full recompute");
}

// NOTE [Expert parallelism]: the experts over ep ranks carved from dp, the tokens sent to them
// and back; every number the 1-process run's.
TEST(MixtralEp, Ep2AndEp2InDp4MatchOneProcess) {
  testing::expect_matches(moe_train({"parallel.dp=2", "parallel.ep=2"}), mixtral_reference(),
                          "mixtral ep2 (dp2)");
  testing::expect_matches(moe_train({"parallel.dp=4", "parallel.ep=2", "parallel.microbatches=2"}),
                          mixtral_reference(), "mixtral ep2 in dp4");
  testing::expect_matches(moe_train({"parallel.dp=4", "parallel.ep=4", "parallel.microbatches=2"}),
                          mixtral_reference(), "mixtral ep4 (dp4, 1 expert a rank)");
}

TEST(MixtralEp, Pp2Ep2MatchesOneProcess) {
  testing::expect_matches(moe_train({"parallel.pp=2", "parallel.dp=2", "parallel.ep=2"}),
                          mixtral_reference(), "mixtral pp2 x ep2 (1f1b)");
}

TEST(MixtralEp, Ep2WithCp2MatchesOneProcess) {
  // NOTE [MoE auxiliary loss]: each sequence's counts summed over the ring.
  testing::expect_matches(moe_train({"parallel.cp=2"}), mixtral_reference(), "mixtral cp2");
  testing::expect_matches(moe_train({"parallel.dp=2", "parallel.ep=2", "parallel.cp=2"}),
                          mixtral_reference(), "mixtral ep2 x cp2");
}

TEST(MixtralEp, EpCarvedFromCpMatchesOneProcess) {
  // ep's ranks taken from cp where dp has too few (mesh/mesh_dims.h: cp_ep holds experts and
  // splits the sequence): ep over cp alone, over dp x cp, inside cp; ZeRO-3 over its replicas.
  testing::expect_matches(moe_train({"parallel.cp=2", "parallel.ep=2"}), mixtral_reference(),
                          "mixtral ep2 over cp2 (dp1)");
  testing::expect_matches(moe_train({"parallel.dp=2", "parallel.cp=2", "parallel.ep=4"}),
                          mixtral_reference(), "mixtral ep4 over dp2 x cp2");
  testing::expect_matches(moe_train({"parallel.cp=4", "parallel.ep=2", "parallel.zero=3"}),
                          mixtral_reference(), "mixtral ep2 inside cp4, zero 3");
}

TEST(MixtralEp, Tp2SequenceParallelAttentionMatchesOneProcess) {
  // mixtral/megatron-sp: the attention tensor- and sequence-parallel, each mixture of experts on
  // every token of every tp rank (the experts Replicate), with and without ep.
  const std::string sp = "parallel.plan=\"mixtral/megatron-sp\"";
  testing::expect_matches(moe_train({"parallel.tp=2", sp}), mixtral_reference(),
                          "mixtral tp2 megatron-sp");
  testing::expect_matches(moe_train({"parallel.dp=2", "parallel.ep=2", "parallel.tp=2", sp}),
                          mixtral_reference(), "mixtral ep2 x tp2 megatron-sp");
}

TEST(MixtralEp, ZeroWithEp2MatchesOneProcess) {
  for (const char* stage : {"1", "2", "3"}) {
    testing::expect_matches(moe_train({"parallel.dp=4", "parallel.ep=2", "parallel.microbatches=2",
                                       std::string("parallel.zero=") + stage}),
                            mixtral_reference(), std::string("mixtral ep2 in dp4, zero ") + stage);
  }
}

TEST(MixtralEp, RecomputeWithEp2MatchesOneProcess) {
  for (const char* recompute : {"full", "selective"}) {
    testing::expect_matches(
        moe_train({"parallel.dp=2", "parallel.ep=2",
                   std::string("training.activation_checkpoint=\"") + recompute + "\""}),
        mixtral_reference(), std::string("mixtral ep2, ") + recompute + " recompute");
  }
}

TEST(MixtralEp, CheckpointsMoveEp2ToOneToEp4) {
  // Saved on ep2, resumed on 1 process; saved there, resumed on ep4 (ZeRO-1); and ep2 (ZeRO-3)
  // to ep4 sharded. A constant learning rate: the runs that save stop at step 3.
  const std::string constant = "lr_scheduler.decay=\"constant\"";
  const std::string every = "metrics.log_interval=1";
  const testing::RunOutput ref = moe_train({constant});
  const std::vector<std::string> ep2{"parallel.dp=2", "parallel.ep=2"};
  const std::vector<std::string> ep4{"parallel.dp=4", "parallel.ep=4", "parallel.microbatches=2"};
  testing::expect_matches(
      testing::resume_across(testing::kMixtralRun, ep2, "merged", {}, {constant, every}), ref,
      "mixtral ep2 -> 1 (merged)");
  std::vector<std::string> ep4_zero1 = ep4;
  ep4_zero1.push_back("parallel.zero=1");
  testing::expect_matches(
      testing::resume_across(testing::kMixtralRun, {}, "merged", ep4_zero1, {constant, every}), ref,
      "mixtral 1 -> ep4 zero 1 (merged)");
  std::vector<std::string> ep2_zero3 = ep2;
  ep2_zero3.push_back("parallel.zero=3");
  testing::expect_matches(
      testing::resume_across(testing::kMixtralRun, ep2_zero3, "sharded", ep4, {constant, every}),
      ref, "mixtral ep2 zero 3 -> ep4 (sharded)");
  // ep carved from cp: its experts held along cp_ep, saved and loaded on another mesh.
  testing::expect_matches(
      testing::resume_across(testing::kMixtralRun, {"parallel.cp=2", "parallel.ep=2"}, "sharded",
                             ep2, {constant, every}),
      ref, "mixtral ep2 over cp2 -> ep2 over dp2 (sharded)");
}

TEST(Mixtral, AuxLossTrains) {
  // The coefficient changes the training: the aux loss's gradient reaches the parameters.
  const testing::RunOutput none = moe_train({"model.router_aux_loss_coef=0.0"});
  ASSERT_EQ(none.losses.size(), mixtral_reference().losses.size());
  EXPECT_EQ(none.losses.front(), mixtral_reference().losses.front());
  EXPECT_NE(none.losses.back(), mixtral_reference().losses.back());
}

}  // namespace
}  // namespace vescale
