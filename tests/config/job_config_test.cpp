#include "config/job_config.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace vescale {
namespace {

std::string error_of(const std::string& text, std::vector<std::string> overrides = {}) {
  try {
    JobConfig::parse(text, "job.toml", overrides);
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(JobConfig, DefaultsFileAndOverrides) {
  const JobConfig c = JobConfig::parse("[training]\nsteps = 7\n[parallel]\ntp = 2\n", "job.toml",
                                       {"training.seed=5", "parallel.plan=gpt/megatron-sp",
                                        "optimizer.lr=1e-2", "job.name=\"quoted\""});
  EXPECT_EQ(c.steps, 7);
  EXPECT_EQ(c.tp, 2);
  EXPECT_EQ(c.seed, 5);
  EXPECT_EQ(c.plan, "gpt/megatron-sp");
  EXPECT_DOUBLE_EQ(c.lr, 1e-2);
  EXPECT_EQ(c.name, "quoted");
  EXPECT_EQ(c.global_batch_size, 8);  // default
  EXPECT_EQ(c.world_size(), 2);
  EXPECT_NE(c.text.find("[training]\nsteps = 7"), std::string::npos) << c.text;
  // A float key accepts an integer.
  EXPECT_DOUBLE_EQ(JobConfig::parse("[optimizer]\nlr = 1\n", "j").lr, 1.0);
  EXPECT_EQ(collect_overrides({"--a.b=1", "--c.d", "2"}),
            (std::vector<std::string>{"a.b=1", "c.d=2"}));
}

TEST(JobConfig, ErrorsNameFileLineAndKey) {
  EXPECT_NE(error_of("[training]\nstpes = 3\n")
                .find("config job.toml:2: unknown key 'training.stpes' (did you mean "
                      "'training.steps'?)"),
            std::string::npos);
  EXPECT_NE(error_of("[training]\nsteps = 1.5\n")
                .find("config job.toml:2: key 'training.steps' must be an integer"),
            std::string::npos);
  EXPECT_NE(error_of("", {"model.nme=gpt"}).find("(did you mean 'model.name'?)"),
            std::string::npos);
  EXPECT_NE(
      error_of("[model]\nname = \"bert\"\n").find("model.name = \"bert\" is not one of gpt, mlp"),
      std::string::npos);
  EXPECT_NE(error_of("[parallel]\npp = 2\n").find("pipeline parallelism is not available yet"),
            std::string::npos);
  EXPECT_NE(error_of("[training]\nseq_len = 128\n").find("longer than model.block_size = 64"),
            std::string::npos);
  EXPECT_NE(error_of("[data]\nsource = \"text\"\n").find("needs data.path"), std::string::npos);
  EXPECT_NE(error_of("steps = 3\n").find("must be a [section]"), std::string::npos);
}

}  // namespace
}  // namespace vescale
