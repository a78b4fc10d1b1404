// Issue [11] item 7: seeded, bounded fuzzing of sharding plans. Each mutated zoo plan, loaded and
// resolved as `plan lint` does, must be a UserError (one message) or a plan that resolves on its
// model; never another exception, a crash or a hang.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "config/job_config.h"
#include "core/error.h"
#include "dmodule/parallelize.h"
#include "dmodule/plan.h"
#include "mesh/job_mesh.h"
#include "support/mutate.h"
#include "train/model_factory.h"

namespace vescale {
namespace {

namespace fs = std::filesystem;

struct ZooPlan {
  std::string model, extension, text;
};

std::vector<ZooPlan> zoo_plans() {
  std::vector<ZooPlan> plans;
  for (const auto& name : plan_zoo_names()) {
    const Plan p = Plan::load(name);
    std::ifstream in(p.source);
    std::stringstream text;
    text << in.rdbuf();
    plans.push_back({name.substr(0, name.find('/')), fs::path(p.source).extension(), text.str()});
  }
  return plans;
}

/// Quoted words a plan is made of: placements that may or may not fit, keys that may or may not
/// match, model names.
const std::vector<std::string> kPlanWords = {"\"S(0)\"",
                                             "\"S(1)\"",
                                             "\"S(2)\"",
                                             "\"S(-1)\"",
                                             "\"S(-3)\"",
                                             "\"S(5)\"",
                                             "\"R\"",
                                             "\"P\"",
                                             "\"P(avg)\"",
                                             "\"P(max)\"",
                                             "\"Shard(1)\"",
                                             "\"Replicate()\"",
                                             "\"S(99)\"",
                                             "\"transformer.h.*.attn.q_proj.weight\"",
                                             "\"transformer.h.*.mlp.output\"",
                                             "\"transformer.h.*.attn.input\"",
                                             "\"fc1.input\"",
                                             "\"fc2.weight\"",
                                             "\"fc1.output\"",
                                             "\"transformer.*\"",
                                             "\"*\"",
                                             "\"**\"",
                                             "\"gpt\"",
                                             "\"mlp\"",
                                             "\"\"",
                                             "\"lm_head.weight\""};

TEST(Fuzz, MutatedPlansAreErrorsOrResolve) {
  const std::vector<ZooPlan> bases = zoo_plans();
  ASSERT_GE(bases.size(), 5u);
  const fs::path dir = fs::temp_directory_path() / fmt::format("vescale-plan-fuzz-{}", ::getpid());
  fs::create_directories(dir);
  testing::Mutator mutate(7);
  const int cases = 1200;
  int resolved = 0, refused = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < cases; ++i) {
    const ZooPlan& base = bases[static_cast<size_t>(i) % bases.size()];
    // Two in three keep the syntax (a key or placement replaced) to reach resolution.
    const auto& hostile = testing::hostile_values();
    std::string text = mutate.text(base.text, hostile);
    if (i % 3 != 0) {
      text = base.text;
      for (size_t edits = 1 + mutate.below(2); edits > 0; --edits)
        text = mutate.replace_quoted(text, kPlanWords[mutate.below(kPlanWords.size())]);
    }
    const fs::path path = dir / fmt::format("plan-{}{}", i, base.extension);
    std::ofstream(path, std::ios::binary) << text;
    const int64_t tp = i % 2 == 0 ? 2 : 4;
    try {
      const JobConfig c = JobConfig::parse(
          "", "fuzz.toml",
          {fmt::format("model.name={}", base.model), fmt::format("parallel.tp={}", tp),
           fmt::format("parallel.plan={}", path.string()), "model.n_head=4"});
      auto model = build_model(c);
      const JobMesh mesh = JobMesh::layout(c.pp, c.dp, c.tp_dims());
      const ResolvedPlan plan = resolve_plan(job_plan(c), *model, mesh.param_mesh());
      EXPECT_FALSE(describe_plan(plan, mesh.param_mesh(), job_dtype(c)).empty());
      ++resolved;
    } catch (const UserError& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
      if (std::getenv("FUZZ_VERBOSE")) std::printf("%s\n", e.what());  // to see what is reached
      ++refused;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "case " << i << " threw a non-user error: " << e.what() << "\n" << text;
    }
  }
  fs::remove_all(dir);
  const double total_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("plan fuzz: %d mutated plans: %d resolved, %d plan errors, 0 other; %.2f s\n", cases,
              resolved, refused, total_s);
  EXPECT_GT(resolved, 0);
  EXPECT_GT(refused, 0);
  EXPECT_LT(total_s, 60);
}

}  // namespace
}  // namespace vescale
