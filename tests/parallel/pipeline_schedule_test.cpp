#include "parallel/pipeline/schedule.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

#include "config/job_config.h"
#include "core/error.h"

namespace vescale::pipeline {
namespace {

/// The message of what `fn` throws (of type E), or "(no error)".
template <typename E, typename Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  }
  return "(no error)";
}

std::string make_error(const std::string& name, int pp, int v, int m) {
  return error_of<UserError>([&] { make_schedule(name, pp, v, m); });
}

/// Whether make_schedule takes the combination (its errors are UserErrors).
bool accepts(const std::string& name, int pp, int v, int m) {
  return make_error(name, pp, v, m) == "(no error)";
}

size_t find_action(const std::vector<Action>& actions, const std::string& text) {
  const Action a = parse_action(text);
  const auto it = std::find(actions.begin(), actions.end(), a);
  EXPECT_NE(it, actions.end()) << text;
  return static_cast<size_t>(it - actions.begin());
}

TEST(PipelineSchedule, ActionTextRoundTrips) {
  for (const char* text :
       {"1F0", "2B3", "0I1", "0W1", "1SEND_F0", "2RECV_F0", "12SEND_B10", "3RECV_B7"})
    EXPECT_EQ(to_string(parse_action(text)), text);
  const Action a = parse_action("2RECV_B3");
  EXPECT_EQ(a.kind, ActionKind::kRecvGrad);
  EXPECT_EQ(a.stage, 2);
  EXPECT_EQ(a.micro, 3);
  for (const char* bad : {"", "F0", "1F", "1X0", "1SEND0", "a1F0", "1F0x"})
    EXPECT_NE(error_of<UserError>([&] { parse_action(bad); }).find("is not an action"),
              std::string::npos)
        << bad;
}

TEST(PipelineSchedule, StagePlacement) {
  EXPECT_EQ(place_stages(StagePlacement::kLoop, 3, 2), (std::vector<int>{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(place_stages(StagePlacement::kV, 4, 2), (std::vector<int>{0, 1, 2, 3, 3, 2, 1, 0}));
  EXPECT_EQ(place_stages(StagePlacement::kV, 1, 2), (std::vector<int>{0, 0}));
}

TEST(PipelineSchedule, ConfigKnowsEverySchedule) {
  for (const auto& name : schedule_names())
    EXPECT_NO_THROW(JobConfig::parse("", "j", {"parallel.pp_schedule=" + name})) << name;
  EXPECT_THROW(JobConfig::parse("", "j", {"parallel.pp_schedule=pipedream"}), UserError);
}

TEST(PipelineSchedule, OneF1BOrderAndMessages) {
  const PipelineSchedule s = make_schedule("1f1b", 2, 1, 3);
  EXPECT_EQ(format_actions(s),
            "rank 0: 0F0 0SEND_F0 0F1 0SEND_F1 0RECV_B0 0B0 0F2 0SEND_F2 0RECV_B1 0B1 0RECV_B2 "
            "0B2\n"
            "rank 1: 1RECV_F0 1F0 1RECV_F1 1B0 1SEND_B0 1F1 1B1 1SEND_B1 1RECV_F2 1F2 1B2 "
            "1SEND_B2\n");
}

TEST(PipelineSchedule, SingleRankHasNoMessages) {
  for (const auto& name : schedule_names()) {
    const int v = name == "zbv" || name == "interleaved-1f1b" ? 2 : 1;
    const PipelineSchedule s = make_schedule(name, 1, v, 3);
    for (const Action& a : s.ranks[0])
      EXPECT_TRUE(is_compute(a.kind)) << name << " " << to_string(a);
    const Simulation sim = simulate(s);
    EXPECT_TRUE(sim.deadlock_free) << name;
    EXPECT_EQ(sim.bubble, 0.0) << name;
  }
  // 1f1b on one stage: F then B per micro-batch.
  EXPECT_EQ(format_actions(make_schedule("1f1b", 1, 1, 2)), "rank 0: 0F0 0B0 0F1 0B1\n");
}

TEST(PipelineSchedule, ZbvTurnStaysOnItsRank) {
  const PipelineSchedule s = make_schedule("zbv", 3, 2, 6);
  EXPECT_EQ(s.stage_rank, (std::vector<int>{0, 1, 2, 2, 1, 0}));
  for (const auto& actions : s.ranks) {
    for (const Action& a : actions) {
      EXPECT_FALSE(a.kind == ActionKind::kSendActivation && a.stage == 2) << to_string(a);
      EXPECT_FALSE(a.kind == ActionKind::kSendGrad && a.stage == 3) << to_string(a);
      EXPECT_NE(a.kind, ActionKind::kBackward) << to_string(a);
    }
  }
  // The loss stage 5 sits on rank 0 with stage 0.
  find_action(s.ranks[0], "5I0");
  find_action(s.ranks[0], "0W5");
}

TEST(PipelineSchedule, InvalidCombinationsSayWhatWorks) {
  EXPECT_NE(make_error("1f1b", 4, 1, 2).find("1f1b needs at least pp = 4 micro-batches, got 2"),
            std::string::npos);
  EXPECT_NE(make_error("zbv", 2, 1, 4).find("zbv needs parallel.pp_virtual = 2"),
            std::string::npos);
  EXPECT_NE(make_error("interleaved-1f1b", 2, 2, 3)
                .find("interleaved-1f1b needs micro-batches divisible by pp = 2, got 3"),
            std::string::npos);
  EXPECT_NE(make_error("interleaved-1f1b", 2, 1, 4).find("parallel.pp_virtual >= 2"),
            std::string::npos);
  EXPECT_NE(make_error("gpipe", 2, 2, 4).find("gpipe needs parallel.pp_virtual = 1"),
            std::string::npos);
  EXPECT_NE(make_error("1f1f", 2, 1, 4).find("unknown schedule '1f1f' (did you mean '1f1b'?)"),
            std::string::npos);
}

/// One row of the grid: a schedule the generator accepts, checked.
struct Row {
  std::string name;
  int pp, v, m;
  double simulated, formula;
};

TEST(PipelineSchedule, GridValidatesSimulatesAndMatchesTheory) {
  std::vector<Row> table;
  int accepted = 0;
  for (const auto& name : schedule_names()) {
    for (int pp = 1; pp <= 4; ++pp) {
      for (int v = 1; v <= 3; ++v) {
        for (int m = pp; m <= 3 * pp; ++m) {
          if (!accepts(name, pp, v, m)) continue;
          ++accepted;
          const std::string label = fmt::format("{} pp={} v={} m={}", name, pp, v, m);
          const PipelineSchedule s = make_schedule(name, pp, v, m);
          EXPECT_EQ(s.stages(), pp * v) << label;
          EXPECT_NO_THROW(validate(s)) << label;
          const Simulation sim = simulate(s);
          ASSERT_TRUE(sim.deadlock_free) << label << "\n" << timeline(s, sim);
          for (int r = 0; r < pp; ++r)
            EXPECT_EQ(sim.busy[r], int64_t{3} * v * m) << label << " rank " << r;
          const double formula = analytic_bubble(name, pp, v, m);
          // zbv: a lower bound, met once the order is not cut short (NOTE [Analytic bubbles]).
          if (name != "zbv" || m >= 2 * pp - 1) {
            EXPECT_NEAR(sim.bubble, formula, 1e-12) << label;
          } else {
            EXPECT_GE(sim.bubble, formula - 1e-12) << label;
          }
          for (int st = 0; st < s.stages(); ++st) {
            if (name == "1f1b" || name == "zb-h1") {
              EXPECT_LE(sim.peak_stashed[st], pp - st) << label << " " << st;
            }
            if (name == "gpipe") {
              EXPECT_EQ(sim.peak_stashed[st], m) << label << " " << st;
            }
          }
          if (m % pp == 0) table.push_back({name, pp, v, m, sim.bubble, formula});
        }
      }
    }
  }
  // gpipe, 1f1b, zb-h1, zbv: 2pp+1 values of m for each pp; interleaved: v 2..3 and m in
  // {pp, 2pp, 3pp}.
  EXPECT_EQ(accepted, 4 * (3 + 5 + 7 + 9) + 2 * 4 * 3);
  std::printf("%-17s %3s %2s %3s %10s %10s\n", "schedule", "pp", "v", "m", "simulated", "formula");
  for (const Row& r : table)
    std::printf("%-17s %3d %2d %3d %10.6f %10.6f%s\n", r.name.c_str(), r.pp, r.v, r.m, r.simulated,
                r.formula, r.name == "zbv" ? "  (zbv: a lower bound)" : "");
}

TEST(PipelineSchedule, InterleavingAndZeroBubbleShrinkTheBubble) {
  for (int pp = 2; pp <= 4; ++pp) {
    const int m = 2 * pp;
    const double one_f_one_b = simulate(make_schedule("1f1b", pp, 1, m)).bubble;
    EXPECT_LT(simulate(make_schedule("zb-h1", pp, 1, m)).bubble, one_f_one_b) << pp;
    EXPECT_LT(simulate(make_schedule("interleaved-1f1b", pp, 2, m)).bubble, one_f_one_b) << pp;
    EXPECT_LT(simulate(make_schedule("zbv", pp, 2, m)).bubble,
              simulate(make_schedule("interleaved-1f1b", pp, 2, m)).bubble)
        << pp;
  }
}

TEST(PipelineSchedule, ForwardAfterItsBackwardFailsValidateAndSimulate) {
  PipelineSchedule s = make_schedule("1f1b", 2, 1, 2);
  std::vector<Action>& rank0 = s.ranks[0];
  std::swap(rank0[find_action(rank0, "0F0")], rank0[find_action(rank0, "0B0")]);
  EXPECT_NE(error_of<Error>([&] { validate(s); }).find("rank 0: 0B0 comes before 0F0"),
            std::string::npos)
      << error_of<Error>([&] { validate(s); });
  const Simulation sim = simulate(s);
  EXPECT_FALSE(sim.deadlock_free);
  ASSERT_FALSE(sim.stuck.empty());
  EXPECT_NE(sim.stuck[0].find("rank 0: 0B0 waits for"), std::string::npos) << sim.stuck[0];
  EXPECT_NE(timeline(s, sim).find("deadlock:"), std::string::npos);
}

TEST(PipelineSchedule, DroppedReceiveFailsValidateAndSimulate) {
  PipelineSchedule s = make_schedule("1f1b", 2, 1, 2);
  std::vector<Action>& rank1 = s.ranks[1];
  rank1.erase(rank1.begin() + static_cast<std::ptrdiff_t>(find_action(rank1, "1RECV_F1")));
  EXPECT_NE(error_of<Error>([&] { validate(s); }).find("rank 1: 1F1 has no 1RECV_F1 before it"),
            std::string::npos)
      << error_of<Error>([&] { validate(s); });
  const Simulation sim = simulate(s);
  EXPECT_FALSE(sim.deadlock_free);
  ASSERT_EQ(sim.stuck.size(), 2u) << fmt::format("{}", fmt::join(sim.stuck, "\n"));
  // Rank 0 waits for the gradient rank 1 never computes.
  EXPECT_NE(sim.stuck[1].find("rank 1: 1F1 waits for its 1RECV_F1"), std::string::npos)
      << sim.stuck[1];
}

TEST(PipelineSchedule, MessagesOutOfOrderOrUnmatchedFailValidate) {
  // Two receives from the same rank posted in the other order: they would pair with the wrong
  // sends.
  PipelineSchedule s = make_schedule("gpipe", 2, 1, 2);
  std::vector<Action>& rank1 = s.ranks[1];
  for (const char* recv : {"1RECV_F0", "1RECV_F1"})
    rank1.erase(rank1.begin() + static_cast<std::ptrdiff_t>(find_action(rank1, recv)));
  rank1.insert(rank1.begin(), {parse_action("1RECV_F1"), parse_action("1RECV_F0")});
  EXPECT_NE(error_of<Error>([&] { validate(s); }).find("pair in order"), std::string::npos)
      << error_of<Error>([&] { validate(s); });
  // A send between stages on the same rank.
  PipelineSchedule z = make_schedule("zbv", 2, 2, 2);
  z.ranks[1].push_back(parse_action("1SEND_F0"));
  EXPECT_NE(error_of<Error>([&] { validate(z); }).find("rank 1: 1SEND_F0 has no peer"),
            std::string::npos)
      << error_of<Error>([&] { validate(z); });
  // A backward on the wrong rank.
  PipelineSchedule w = make_schedule("1f1b", 2, 1, 2);
  w.ranks[0].push_back(parse_action("1B0"));
  EXPECT_NE(error_of<Error>([&] { validate(w); }).find("rank 0: 1B0 belongs on rank 1"),
            std::string::npos);
}

TEST(PipelineSchedule, TimelineShowsEveryRank) {
  const PipelineSchedule s = make_schedule("1f1b", 2, 1, 2);
  const Simulation sim = simulate(s);
  EXPECT_EQ(sim.makespan, 9);  // (m + p - 1)(F + B)
  const std::string text = timeline(s, sim);
  std::printf("%s", text.c_str());
  EXPECT_NE(text.find("rank 0 | 0F0 0F1 .   .   0B0 ~   .   0B1 ~"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 1 | .   1F0 1B0 ~   1F1 1B1 ~   .   ."), std::string::npos) << text;
}

}  // namespace
}  // namespace vescale::pipeline
