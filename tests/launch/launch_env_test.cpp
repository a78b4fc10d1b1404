#include "launch/launch_env.h"

#include <gtest/gtest.h>

#include <map>

#include "core/error.h"

namespace vescale {
namespace {

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(LaunchEnv, NoneWithoutLauncher) {
  EXPECT_FALSE(detect_launch_env(env_of({})).has_value());
}

TEST(LaunchEnv, Torchrun) {
  auto e = detect_launch_env(env_of({{"RANK", "3"},
                                     {"WORLD_SIZE", "8"},
                                     {"LOCAL_RANK", "1"},
                                     {"LOCAL_WORLD_SIZE", "2"},
                                     {"MASTER_ADDR", "node0"},
                                     {"MASTER_PORT", "29400"}}));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->source, "torchrun");
  EXPECT_EQ(e->rank, 3);
  EXPECT_EQ(e->world, 8);
  EXPECT_EQ(e->local_rank, 1);
  EXPECT_EQ(e->local_world, 2);
  EXPECT_EQ(e->master_addr, "node0");
  EXPECT_EQ(e->master_port, 29400);
}

TEST(LaunchEnv, OurLocalLauncher) {
  auto e = detect_launch_env(env_of({{"RANK", "0"},
                                     {"WORLD_SIZE", "2"},
                                     {"MASTER_ADDR", "127.0.0.1"},
                                     {"MASTER_PORT", "1234"},
                                     {"VESCALE_LAUNCHER", "local"}}));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->source, "local");
}

TEST(LaunchEnv, TorchrunWinsOverSlurm) {
  auto e = detect_launch_env(env_of({{"RANK", "1"},
                                     {"WORLD_SIZE", "2"},
                                     {"MASTER_ADDR", "a"},
                                     {"MASTER_PORT", "5"},
                                     {"SLURM_PROCID", "0"},
                                     {"SLURM_NTASKS", "1"}}));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->source, "torchrun");
}

TEST(LaunchEnv, SlurmWithNodeList) {
  auto e = detect_launch_env(env_of({{"SLURM_PROCID", "5"},
                                     {"SLURM_NTASKS", "16"},
                                     {"SLURM_LOCALID", "1"},
                                     {"SLURM_NTASKS_PER_NODE", "4"},
                                     {"SLURM_JOB_NODELIST", "gpu[07-10],cpu1"},
                                     {"SLURM_JOB_ID", "123456"}}));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->source, "slurm");
  EXPECT_EQ(e->rank, 5);
  EXPECT_EQ(e->world, 16);
  EXPECT_EQ(e->local_rank, 1);
  EXPECT_EQ(e->master_addr, "gpu07");
  EXPECT_EQ(e->master_port, 20000 + 123456 % 20000);
}

TEST(LaunchEnv, OpenMpiSingleNode) {
  auto e = detect_launch_env(env_of({{"OMPI_COMM_WORLD_RANK", "2"},
                                     {"OMPI_COMM_WORLD_SIZE", "4"},
                                     {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                                     {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}}));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->source, "openmpi");
  EXPECT_EQ(e->master_addr, "127.0.0.1");
  EXPECT_EQ(e->master_port, 29500);
}

TEST(LaunchEnv, ErrorsNameTheVariable) {
  auto expect_error = [](std::map<std::string, std::string> vars, const std::string& needle) {
    try {
      detect_launch_env(env_of(vars));
      ADD_FAILURE() << "expected an error mentioning " << needle;
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error({{"RANK", "x"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}},
               "RANK='x'");
  expect_error({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}},
               "RANK=2");
  expect_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "1"}}, "MASTER_ADDR");
  expect_error({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}}, "MASTER_PORT");
  expect_error({{"OMPI_COMM_WORLD_RANK", "0"},
                {"OMPI_COMM_WORLD_SIZE", "8"},
                {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}},
               "MASTER_ADDR");
}

TEST(SlurmNodeList, FirstHost) {
  EXPECT_EQ(first_host_of_nodelist("node1"), "node1");
  EXPECT_EQ(first_host_of_nodelist("node1,node2"), "node1");
  EXPECT_EQ(first_host_of_nodelist("gpu[007-009]"), "gpu007");
  EXPECT_EQ(first_host_of_nodelist("gpu[3,5-6],cpu[1-2]"), "gpu3");
  EXPECT_EQ(first_host_of_nodelist("rack1-gpu[12]"), "rack1-gpu12");
}

}  // namespace
}  // namespace vescale

namespace vescale {
namespace {

TEST(LaunchEnv, TorchrunAgentStore) {
  auto e = detect_launch_env(env_of({{"RANK", "1"},
                                     {"WORLD_SIZE", "2"},
                                     {"MASTER_ADDR", "127.0.0.1"},
                                     {"MASTER_PORT", "29400"},
                                     {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                                     {"TORCHELASTIC_RESTART_COUNT", "3"}}));
  ASSERT_TRUE(e);
  EXPECT_TRUE(e->agent_store);
  EXPECT_EQ(e->restart_count, 3);
}

}  // namespace
}  // namespace vescale
