// plan auto (NOTE [Plan auto]): the enumeration is complete and only valid (ep among a mixture
// of experts' layouts), the memory model matches the trainer's measured tensor bytes (expert
// parallelism's too), the bubble term is the schedule simulator's, expert parallelism is priced
// by its all-to-alls, and a layout that does not fit is priced again with activation
// checkpointing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <set>

#include "autoplan/cost_model.h"
#include "autoplan/layout.h"
#include "config/expert_volume.h"
#include "config/memory_estimate.h"
#include "config/ring_volume.h"
#include "core/error.h"
#include "dmodule/parallelize.h"
#include "mesh/job_mesh.h"
#include "parallel/pipeline/schedule.h"
#include "support/run_ranks.h"
#include "support/training_runs.h"
#include "train/job.h"
#include "train/model_factory.h"

namespace vescale::autoplan {
namespace {

JobConfig gpt(std::vector<std::string> overrides = {}) {
  overrides.push_back("job.dump_folder=\"" + testing::fresh_folder("vescale-auto") + "\"");
  return JobConfig::parse(testing::kGptRun, "plan_auto_test.toml", overrides);
}

/// A mixture of experts: 4 layers of 4 experts (2 per token), C = 32, I = 24, float64.
JobConfig mixtral(std::vector<std::string> overrides = {}) {
  overrides.push_back("job.dump_folder=\"" + testing::fresh_folder("vescale-auto") + "\"");
  return JobConfig::parse(testing::kMixtralRun, "plan_auto_test.toml", overrides);
}

TEST(PlanAuto, EnumerationIsCompleteAndOnlyValid) {
  const JobConfig base = gpt({"model.n_layer=8"});
  const Enumeration e = enumerate_layouts(base, 4);
  std::printf("%lld layouts considered, %zu valid, %zu rejected\n",
              static_cast<long long>(e.considered), e.valid.size(), e.rejected.size());
  EXPECT_EQ(static_cast<size_t>(e.considered), e.valid.size() + e.rejected.size());
  std::set<std::string> seen;
  for (const Layout& l : e.valid) {
    EXPECT_TRUE(seen.insert(l.str()).second) << "listed twice: " << l.str();
    EXPECT_EQ(l.pp * l.dp * l.cp * l.tp, 4) << l.str();
    EXPECT_EQ(l.ep, 1) << "a dense model has no experts to split: " << l.str();
    // What `plan lint` does, from the config the layout writes.
    const JobConfig c = layout_config(base, l);
    auto model = build_model(c);
    const JobMesh job = JobMesh::layout(c.mesh_dims());
    EXPECT_NO_THROW(resolve_plan(job_plan(c), *model, job.param_mesh())) << l.str();
    if (c.pp > 1) {
      EXPECT_NO_THROW(pipeline::make_schedule(config_name(c.pp_schedule), static_cast<int>(c.pp),
                                              static_cast<int>(c.pp_virtual),
                                              static_cast<int>(c.microbatches)))
          << l.str();
    }
  }
  // Complete: every (pp, dp, cp, tp) split (16 tokens: cp 2 and 4 split them), sp on and off
  // under tp, every ZeRO stage over dp x cp, every micro-batch count dividing the batch, every
  // schedule the project has. Counted here for cp = 1.
  auto has = [&](const std::string& text) { return seen.count(text) == 1; };
  for (const char* expected :
       {"pp=1 dp=4 tp=1 zero=0 mb=1", "pp=1 dp=4 tp=1 zero=3 mb=2", "pp=1 dp=1 tp=4 sp zero=0 mb=1",
        "pp=1 dp=1 tp=4 zero=0 mb=8", "pp=1 dp=2 tp=2 sp zero=1 mb=4",
        "pp=2 dp=2 tp=1 zero=2 mb=2 1f1b", "pp=2 dp=1 tp=2 sp zero=0 mb=4 gpipe",
        "pp=4 dp=1 tp=1 zero=0 mb=8 interleaved-1f1b v=2", "pp=4 dp=1 tp=1 zero=0 mb=8 zbv v=2",
        "pp=2 dp=1 tp=2 zero=0 mb=2 zb-h1", "pp=1 dp=2 cp=2 tp=1 zero=3 mb=2",
        "pp=1 dp=1 cp=2 tp=2 sp zero=1 mb=8", "pp=1 dp=1 cp=4 tp=1 zero=0 mb=1",
        "pp=2 dp=1 cp=2 tp=1 zero=0 mb=4 zbv v=2"}) {
    EXPECT_TRUE(has(expected)) << "missing: " << expected;
  }
  for (int64_t pp : {1, 2, 4})
    for (int64_t tp : {1, 2, 4}) {
      if (4 % (pp * tp) != 0) continue;
      const int64_t dp = 4 / pp / tp;
      const int64_t zeros = dp > 1 ? 4 : 1;
      const int64_t sps = tp > 1 ? 2 : 1;
      const int64_t mbs = 8 / dp == 8 ? 4 : 8 / dp == 4 ? 3 : 2;  // divisors of 8 / dp
      const int64_t schedules =
          pp > 1 ? 2 * static_cast<int64_t>(pipeline::schedule_names().size()) : 1;
      int64_t listed = 0;
      for (const Layout& l : e.valid)
        listed += l.pp == pp && l.tp == tp && l.cp == 1;
      for (const auto& r : e.rejected)
        listed += r.rfind(fmt::format("pp={} dp={} tp={}", pp, dp, tp), 0) == 0;
      EXPECT_EQ(listed, zeros * sps * mbs * schedules) << "pp=" << pp << " tp=" << tp;
    }
}

/// Rank 0's parameters, gradients and optimizer state as the trainer counts them (from its
/// tensors) against the model's, each within 10%; returns the largest relative error.
double expect_state_matches_trainer(const JobConfig& c, const std::string& label) {
  const StateMemory predicted = state_memory_by_stage(c).at(0);
  std::map<std::string, int64_t> measured;
  testing::run_ranks(static_cast<int>(c.world_size()), [&](const comm::Group& world) {
    auto job = build_job(c, world);
    job->train_step->run([&](int64_t micro) { return job->model->micro_batch(0, micro); }, 1e-3);
    if (world.rank() != 0) return;
    for (const auto& [kind, bytes] : job->state_bytes())
      measured[kind] = bytes;
  });
  double worst = 0;
  for (const auto& [kind, value] :
       std::vector<std::pair<std::string, double>>{{"params", predicted.params},
                                                   {"grads", predicted.grads},
                                                   {"optimizer", predicted.optimizer}}) {
    const double m = static_cast<double>(measured.at(kind));
    const double error = std::abs(value - m) / m;
    worst = std::max(worst, error);
    std::printf("%-70s %-9s predicted %9.0f measured %9.0f bytes (%.2f%%)\n", label.c_str(),
                kind.c_str(), value, m, 100 * error);
    EXPECT_LT(error, 0.10) << label << " " << kind;
  }
  return worst;
}

TEST(PlanAuto, StateMemoryMatchesTheTrainersTensorBytes) {
  // Over ZeRO stages, tp and pp.
  double worst = 0;
  for (const std::vector<std::string>& layout : std::vector<std::vector<std::string>>{
           {"parallel.dp=2"},
           {"parallel.dp=2", "parallel.zero=1"},
           {"parallel.dp=2", "parallel.zero=2"},
           {"parallel.dp=4", "parallel.zero=3"},
           {"parallel.tp=2", "parallel.plan=\"gpt/megatron-tp\""},
           {"parallel.dp=2", "parallel.tp=2", "parallel.zero=2",
            "parallel.plan=\"gpt/megatron-sp\""},
           {"parallel.pp=2", "parallel.microbatches=2"},
           {"parallel.pp=2", "parallel.dp=2", "parallel.zero=3", "parallel.microbatches=2"},
           {"parallel.dp=2", "parallel.cp=2", "parallel.zero=3"},
           {"parallel.cp=2", "parallel.tp=2", "parallel.zero=1",
            "parallel.plan=\"gpt/megatron-sp\""}}) {
    std::vector<std::string> overrides = {"parallel.microbatches=1"};
    overrides.insert(overrides.end(), layout.begin(), layout.end());
    overrides.insert(overrides.end(), {"model.n_layer=4", "model.n_embd=32"});
    worst = std::max(worst, expect_state_matches_trainer(
                                gpt(overrides), fmt::format("{}", fmt::join(layout, " "))));
  }
  std::printf("largest error %.2f%%\n", 100 * worst);
}

TEST(PlanAuto, ExpertStateMemoryMatchesTheTrainersTensorBytes) {
  // A rank holds 1 / ep of the experts, their ZeRO state split over dp / ep (NOTE [Expert
  // parallelism]).
  double worst = 0;
  for (const std::vector<std::string>& layout : std::vector<std::vector<std::string>>{
           {"parallel.dp=2", "parallel.ep=2"},
           {"parallel.dp=4", "parallel.ep=2", "parallel.zero=1"},
           {"parallel.dp=4", "parallel.ep=2", "parallel.zero=3"}}) {
    std::vector<std::string> overrides = {"parallel.microbatches=1"};
    overrides.insert(overrides.end(), layout.begin(), layout.end());
    worst = std::max(worst, expect_state_matches_trainer(
                                mixtral(overrides), fmt::format("{}", fmt::join(layout, " "))));
  }
  std::printf("largest error %.2f%%\n", 100 * worst);
}

MachineFacts synthetic_facts() {
  MachineFacts facts;
  facts.compute.gemm = {{1e6, 1e10}, {1e9, 1e10}};
  facts.compute.stream_bytes_per_s = 1e10;
  facts.compute.block_probe_s = 1e-3;
  for (const char* op : {"all_reduce", "all_gather", "reduce_scatter", "send_recv"})
    facts.comm[op][2] = {1e-5, 1e9};
  return facts;
}

TEST(PlanAuto, ContextParallelismIsPricedByItsRing) {
  // 256 tokens: on cp = 2 a rank keeps half the tokens' activations and none of the T x T
  // probabilities, computes about half the block work and sends the ring's bytes.
  const JobConfig base = gpt({"model.block_size=256", "training.seq_len=256"});
  const MachineFacts facts = synthetic_facts();
  Layout one;
  Layout ring;
  ring.cp = 2;
  const Prediction alone = predict(layout_config(base, one), one, facts);
  const JobConfig c = layout_config(base, ring);
  const Prediction split = predict(c, ring, facts);
  const RingVolume volume = ring_volume(c);
  std::printf(
      "cp 1: compute %.3g s, comm %.3g s, activations %.0f B; cp 2: compute %.3g s, comm "
      "%.3g s, activations %.0f B, ring %.0f B per step\n",
      alone.compute_s, alone.comm_s, alone.activations, split.compute_s, split.comm_s,
      split.activations, volume.send_bytes_per_step);
  EXPECT_LT(split.activations, alone.activations / 2);
  EXPECT_LT(split.compute_s, alone.compute_s);
  EXPECT_GT(split.comm_s, alone.comm_s);
  // 4 blocks x 4 micro-batches x 3 sends of 2 x 2 rows x 128 tokens x 16 x 8 B.
  EXPECT_EQ(volume.send_bytes_per_step, 4.0 * 4 * 3 * (2.0 * 2 * 128 * 16 * 8));
  // The ring's time is at least its bytes at the fitted bandwidth.
  EXPECT_GE(split.comm_s - alone.comm_s, volume.send_bytes_per_step / 1e9);
}

TEST(PlanAuto, BubbleIsTheSchedulesSimulation) {
  for (const auto& [schedule, v] : std::vector<std::pair<std::string, int>>{
           {"gpipe", 1}, {"1f1b", 1}, {"interleaved-1f1b", 2}, {"zbv", 2}, {"zb-h1", 1}}) {
    for (int mb : {4, 8}) {
      const JobConfig c = gpt(
          {"parallel.pp=2", fmt::format("parallel.pp_schedule=\"{}\"", schedule),
           fmt::format("parallel.pp_virtual={}", v), fmt::format("parallel.microbatches={}", mb)});
      const double simulated =
          pipeline::simulate(pipeline::make_schedule(schedule, 2, v, mb)).bubble;
      EXPECT_EQ(schedule_bubble(c), simulated) << schedule << " mb " << mb;
      const MachineFacts facts = synthetic_facts();
      Layout l;
      l.pp = 2;
      l.schedule = schedule;
      l.virtual_stages = v;
      l.microbatches = mb;
      EXPECT_EQ(predict(c, l, facts).bubble, simulated) << schedule << " mb " << mb;
    }
  }
}

TEST(PlanAuto, ALayoutThatDoesNotFitIsPricedAgainWithRecompute) {
  const JobConfig base = gpt({"model.n_embd=64", "model.block_size=64", "training.seq_len=64"});
  const MachineFacts facts = synthetic_facts();
  const Layout l;  // 1 process
  const Prediction none = predict_fitting(base, l, facts, 1e12);
  EXPECT_TRUE(none.fits);
  EXPECT_EQ(none.layout.recompute, Recompute::kNone);
  // Less memory than keeping every activation needs: selective, then full, with the time each
  // adds.
  const Prediction tight = predict_fitting(base, l, facts, none.memory() - 1);
  EXPECT_TRUE(tight.fits);
  EXPECT_NE(tight.layout.recompute, Recompute::kNone);
  EXPECT_LT(tight.activations, none.activations);
  EXPECT_GT(tight.compute_s, none.compute_s);
  Layout full = l;
  full.recompute = Recompute::kFull;
  const Prediction tightest =
      predict_fitting(base, l, facts, predict(layout_config(base, full), full, facts).memory());
  EXPECT_EQ(tightest.layout.recompute, Recompute::kFull);
  std::printf("activations: none %.0f B, %s %.0f B, full %.0f B; compute %.3g s, %.3g s, %.3g s\n",
              none.activations, config_name(tight.layout.recompute), tight.activations,
              tightest.activations, none.compute_s, tight.compute_s, tightest.compute_s);
  EXPECT_LT(tightest.activations, tight.activations);
  EXPECT_GT(tightest.compute_s, tight.compute_s);
  // Nothing fits: the layout comes back as it was, not fitting.
  const Prediction none_fits = predict_fitting(base, l, facts, 1.0);
  EXPECT_FALSE(none_fits.fits);
  EXPECT_EQ(none_fits.layout.recompute, Recompute::kNone);
}

TEST(PlanAuto, ExpertParallelismIsEnumeratedForAMixtureOfExperts) {
  // 4 experts on 4 ranks: every ep dividing dp x cp (and the experts) is a layout, ep = 1
  // included.
  const JobConfig base = mixtral();
  const Enumeration e = enumerate_layouts(base, 4);
  std::map<int64_t, std::set<int64_t>> eps_by_dp;
  std::set<std::string> seen;
  for (const Layout& l : e.valid) {
    EXPECT_EQ(l.dp * l.cp % l.ep, 0) << l.str();
    EXPECT_EQ(4 % l.ep, 0) << l.str();
    EXPECT_EQ(layout_config(base, l).ep, l.ep) << l.str();
    if (l.pp == 1) eps_by_dp[l.dp].insert(l.ep);
    seen.insert(l.str());
  }
  EXPECT_EQ(eps_by_dp[4], (std::set<int64_t>{1, 2, 4}));
  // ep's ranks carved from cp where dp has too few.
  EXPECT_EQ(seen.count("pp=1 dp=1 ep=2 cp=2 tp=2 sp zero=0 mb=1"), 1u);
  EXPECT_EQ(seen.count("pp=1 dp=2 ep=4 cp=2 tp=1 zero=3 mb=1"), 1u);
  for (const char* expected :
       {"pp=1 dp=4 tp=1 zero=0 mb=1", "pp=1 dp=4 ep=2 tp=1 zero=1 mb=2",
        "pp=1 dp=4 ep=4 tp=1 zero=3 mb=1", "pp=2 dp=2 ep=2 tp=1 zero=0 mb=2 1f1b"})
    EXPECT_EQ(seen.count(expected), 1u) << "missing: " << expected;
  // 3 experts do not split over 2 or 4 ranks.
  for (const Layout& l : enumerate_layouts(mixtral({"model.num_experts=3"}), 4).valid)
    EXPECT_EQ(l.ep, 1) << l.str();
}

/// synthetic_facts over groups of 2 and 4, with all_to_all figures of their own.
MachineFacts expert_facts() {
  MachineFacts facts = synthetic_facts();
  for (const char* op : {"all_reduce", "all_gather", "reduce_scatter", "send_recv"})
    facts.comm[op][4] = {2e-5, 5e8};
  facts.comm["all_to_all"][2] = {3e-5, 2e8};
  facts.comm["all_to_all"][4] = {4e-5, 1e8};
  return facts;
}

TEST(PlanAuto, ExpertParallelismIsPricedByItsAllToAlls) {
  const JobConfig base = mixtral({"parallel.microbatches=1"});
  const MachineFacts facts = expert_facts();
  auto layout = [](int64_t ep) {
    Layout l;
    l.dp = 4;
    l.ep = ep;
    return l;
  };
  const Prediction one = predict(layout_config(base, layout(1)), layout(1), facts);
  const Prediction two = predict(layout_config(base, layout(2)), layout(2), facts);
  const Prediction four = predict(layout_config(base, layout(4)), layout(4), facts);
  std::printf(
      "ep 1: comm %.3g s (ep %.3g s), state %.0f B; ep 2: comm %.3g s (ep %.3g s), "
      "state %.0f B; ep 4: comm %.3g s (ep %.3g s), state %.0f B\n",
      one.comm_s, one.comm.ep, one.state.total(), two.comm_s, two.comm.ep, two.state.total(),
      four.comm_s, four.comm.ep, four.state.total());
  EXPECT_EQ(one.comm.ep, 0.0);
  EXPECT_EQ(one.comm_s, one.comm.total());
  // Per layer (4) and micro-batch (1): 4 all-to-alls of a rank's 2 x 16 tokens x 2 experts
  // = 64 rows of 32 float64s, and 1 of the 4 experts' int64 counts, at all_to_all's fit over ep.
  const CommFit over_two = facts.fit("all_to_all", 2);
  EXPECT_DOUBLE_EQ(two.comm.ep, 4.0 * (4 * over_two.time(64 * 32 * 8) + over_two.time(4 * 8)));
  const CommFit over_four = facts.fit("all_to_all", 4);
  EXPECT_DOUBLE_EQ(four.comm.ep, 4.0 * (4 * over_four.time(64 * 32 * 8) + over_four.time(4 * 8)));
  // A calibration without all_to_all figures prices them at all_gather's over the same group.
  MachineFacts older = facts;
  older.comm.erase("all_to_all");
  const CommFit gather = older.fit("all_gather", 2);
  EXPECT_DOUBLE_EQ(predict(layout_config(base, layout(2)), layout(2), older).comm.ep,
                   4.0 * (4 * gather.time(64 * 32 * 8) + gather.time(4 * 8)));

  // Memory: a rank holds 1 / ep of the experts (float64, no ZeRO: 8 B each for the parameter
  // and its gradient); the rest as at ep = 1.
  const double experts = estimate_memory(base).expert_parameters;
  EXPECT_EQ(experts, 4.0 * 4 * 3 * 32 * 24);
  EXPECT_DOUBLE_EQ(one.state.params - two.state.params, experts / 2 * 8);
  EXPECT_DOUBLE_EQ(one.state.params - four.state.params, experts * 3 / 4 * 8);
  EXPECT_DOUBLE_EQ(one.state.expert_grads, experts * 8);
  EXPECT_DOUBLE_EQ(two.state.expert_grads, experts / 2 * 8);
  EXPECT_DOUBLE_EQ(one.state.grads - one.state.expert_grads,
                   two.state.grads - two.state.expert_grads);
  // ep = 4 holds each expert once: only the dense gradients are reduced over dp.
  EXPECT_LT(four.comm.dp, one.comm.dp);
  // The explanation says how ep is priced, and a dense model's has no ep line.
  const std::string explained = explain_model(base, facts);
  EXPECT_NE(explained.find("  ep: "), std::string::npos) << explained;
  EXPECT_NE(explain_model(base, older).find("this calibration has no all_to_all"),
            std::string::npos);
  EXPECT_EQ(explain_model(gpt(), facts).find("  ep: "), std::string::npos);
}

TEST(PlanAuto, CalibrationRoundTripsAndBadFilesAreNamed) {
  MachineFacts f;
  f.nproc = 4;
  f.host = "h";
  f.cores = 2;
  f.compute.gemm = {{1e6, 2e10}, {1e8, 4e10}};
  f.compute.stream_bytes_per_s = 1e10;
  f.comm["all_reduce"][2] = {1e-4, 5e8};
  f.tp_framework["megatron-sp"][2] = {1e-3, 2e-3};
  const MachineFacts back = MachineFacts::from_json(f.to_json(), "x.json");
  EXPECT_EQ(back.to_json(), f.to_json());
  EXPECT_EQ(back.framework(2, true).model_s, 2e-3);
  EXPECT_THROW(back.framework(2, false), Error);  // not measured: an error, not a guess
  EXPECT_NEAR(back.compute.gemm_rate(1e7), std::sqrt(2e10 * 4e10), 1.0);  // log-log halfway
  MachineFacts alone = f;  // one rank: nothing to communicate
  alone.comm.clear();
  alone.tp_framework.clear();
  EXPECT_EQ(MachineFacts::from_json(alone.to_json(), "x.json").to_json(), alone.to_json());
  EXPECT_THROW(MachineFacts::from_json("{\"format\": 1}", "x.json"), UserError);
  try {
    MachineFacts::from_json("not json", "cache.json");
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("cache.json"), std::string::npos) << e.what();
  }
  const CommFit fit = fit_comm({{1e3, 1e-4 + 1e3 / 1e9}, {1e6, 1e-4 + 1e6 / 1e9}});
  EXPECT_NEAR(fit.alpha_s, 1e-4, 1e-9);
  EXPECT_NEAR(fit.bytes_per_s, 1e9, 1e3);
}

}  // namespace
}  // namespace vescale::autoplan
