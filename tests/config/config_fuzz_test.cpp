// Issue [11] item 7: seeded, bounded fuzzing of job configs. Each mutated config must be a
// UserError (one message) or a config whose every number is in its range and whose effective
// text parses back to itself; never another exception, a crash or a hang.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <variant>

#include "config/config_schema.h"
#include "config/job_config.h"
#include "core/error.h"
#include "dmodule/parallelize.h"
#include "dmodule/plan.h"
#include "mesh/job_mesh.h"
#include "support/mutate.h"
#include "train/model_factory.h"

namespace vescale {
namespace {

std::vector<std::string> shipped_configs() {
  std::vector<std::string> texts;
  const std::filesystem::path dir = std::filesystem::path(plan_zoo_dir()).parent_path() / "configs";
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".toml") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    texts.push_back(text.str());
  }
  std::sort(texts.begin(), texts.end());  // directory order is not the seed's
  return texts;
}

/// Where an accepted config breaks what parsing promises, or "".
std::string broken_promise(const JobConfig& c) {
  for (const auto& k : config_schema()) {
    if (!k.range) continue;
    double value = 0;
    const ConfigValue v = config_value(c, k);
    if (const auto* i = std::get_if<int64_t>(&v)) value = static_cast<double>(*i);
    if (const auto* d = std::get_if<double>(&v)) value = *d;
    if (!k.range->contains(value))
      return fmt::format("{} = {} outside {}", k.name, value, k.range->str());
  }
  const JobConfig again = JobConfig::parse(c.text, "again.toml");
  if (again.text != c.text) return "the effective text does not parse back to itself";
  return "";
}

void lint(const JobConfig& c) {
  auto model = build_model(c);
  const JobMesh mesh = JobMesh::layout(c.pp, c.dp, c.tp_dims());
  resolve_plan(job_plan(c), *model, mesh.param_mesh());
}

TEST(Fuzz, MutatedConfigsAreErrorsOrSoundConfigs) {
  const std::vector<std::string> bases = shipped_configs();
  ASSERT_GE(bases.size(), 3u);
  std::vector<std::string> hostile = testing::hostile_values();
  for (const auto& k : config_schema())  // keys of every section, with hostile values added
    hostile.push_back(k.name.substr(k.name.find('.') + 1) + " = -1");
  testing::Mutator mutate(20261122);
  const int cases = 1200;
  int accepted = 0, refused = 0;
  double slowest_s = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < cases; ++i) {
    const std::string text = mutate.text(bases[static_cast<size_t>(i) % bases.size()], hostile);
    const auto t0 = std::chrono::steady_clock::now();
    try {
      const JobConfig c = JobConfig::parse(text, "fuzz.toml");
      const std::string broken = broken_promise(c);
      EXPECT_EQ(broken, "") << "case " << i << ":\n" << text;
      lint(c);  // what `plan lint` does next: the model, its plan, resolved on the mesh
      ++accepted;
    } catch (const UserError& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
      ++refused;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "case " << i << " threw a non-user error: " << e.what() << "\n" << text;
    }
    slowest_s = std::max(
        slowest_s, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  const double total_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "config fuzz: %d mutated configs: %d accepted (sound, linted), %d config errors, 0 other; "
      "slowest %.3f s, all %.2f s\n",
      cases, accepted, refused, slowest_s, total_s);
  EXPECT_GT(accepted, 0);
  EXPECT_GT(refused, 0);
  EXPECT_LT(total_s, 60);
}

}  // namespace
}  // namespace vescale
