#include "launch/launch_env.h"

#include <fmt/format.h>

#include <cstdlib>

#include "core/error.h"

namespace vescale {
namespace {

constexpr int kDefaultPort = 29500;

int int_var(const EnvLookup& env, const std::string& name, std::optional<int> fallback = {}) {
  auto value = env(name);
  if (!value) {
    VS_USER_CHECK(fallback.has_value(), "[launch] environment variable {} is not set", name);
    return *fallback;
  }
  char* end = nullptr;
  long parsed = std::strtol(value->c_str(), &end, 10);
  VS_USER_CHECK(!value->empty() && *end == '\0' && parsed >= 0,
                "[launch] environment variable {}='{}' is not a whole number", name, *value);
  return static_cast<int>(parsed);
}

void check_rank(const LaunchEnv& e, const std::string& rank_var, const std::string& world_var) {
  VS_USER_CHECK(e.world >= 1 && e.rank < e.world, "[launch] {}={} is not a rank of {}={}", rank_var,
                e.rank, world_var, e.world);
  VS_USER_CHECK(e.master_port > 0 && e.master_port < 65536,
                "[launch] MASTER_PORT={} is not a valid port", e.master_port);
}

}  // namespace

std::string LaunchEnv::str() const {
  if (!store_file.empty())
    return fmt::format("rank {}/{} (local {}/{}) via {}, rendezvous file {}", rank, world,
                       local_rank, local_world, source, store_file);
  return fmt::format("rank {}/{} (local {}/{}) via {}, rendezvous {}:{}", rank, world, local_rank,
                     local_world, source, master_addr, master_port);
}

std::optional<std::string> process_env(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

std::string first_host_of_nodelist(const std::string& nodelist) {
  // The first entry ends at a comma outside brackets.
  size_t end = 0;
  int depth = 0;
  for (; end < nodelist.size(); ++end) {
    if (nodelist[end] == '[') ++depth;
    if (nodelist[end] == ']') --depth;
    if (nodelist[end] == ',' && depth == 0) break;
  }
  const std::string first = nodelist.substr(0, end);
  const size_t open = first.find('[');
  if (open == std::string::npos) return first;
  // "prefix[07-09,12]" -> prefix + "07"
  const size_t stop = first.find_first_of("-,]", open + 1);
  VS_USER_CHECK(stop != std::string::npos && stop > open + 1,
                "[launch] cannot read the first host of SLURM node list '{}'", nodelist);
  return first.substr(0, open) + first.substr(open + 1, stop - open - 1);
}

std::optional<LaunchEnv> detect_launch_env(const EnvLookup& env) {
  LaunchEnv e;
  if (env("RANK") && env("WORLD_SIZE")) {
    auto launcher = env("VESCALE_LAUNCHER");
    e.source = launcher && *launcher == "local" ? "local" : "torchrun";
    e.rank = int_var(env, "RANK");
    e.world = int_var(env, "WORLD_SIZE");
    e.local_rank = int_var(env, "LOCAL_RANK", e.rank);
    e.local_world = int_var(env, "LOCAL_WORLD_SIZE", e.world);
    auto addr = env("MASTER_ADDR");
    VS_USER_CHECK(addr.has_value() || e.world == 1,
                  "[launch] RANK and WORLD_SIZE are set but MASTER_ADDR is not");
    e.master_addr = addr.value_or("127.0.0.1");
    if (e.source == "local") e.store_file = env("VESCALE_STORE_FILE").value_or("");
    const bool port_needed = e.world > 1 && e.store_file.empty();
    e.master_port =
        int_var(env, "MASTER_PORT", port_needed ? std::nullopt : std::optional<int>(kDefaultPort));
    auto agent = env("TORCHELASTIC_USE_AGENT_STORE");
    e.agent_store = agent && (*agent == "True" || *agent == "true" || *agent == "1");
    e.restart_count = int_var(env, "TORCHELASTIC_RESTART_COUNT", 0);
    check_rank(e, "RANK", "WORLD_SIZE");
    return e;
  }
  if (env("SLURM_PROCID") && env("SLURM_NTASKS")) {
    e.source = "slurm";
    e.rank = int_var(env, "SLURM_PROCID");
    e.world = int_var(env, "SLURM_NTASKS");
    e.local_rank = int_var(env, "SLURM_LOCALID", 0);
    e.local_world = int_var(env, "SLURM_NTASKS_PER_NODE", 1);
    if (auto addr = env("MASTER_ADDR")) {
      e.master_addr = *addr;
    } else {
      auto nodes = env("SLURM_JOB_NODELIST");
      if (!nodes) nodes = env("SLURM_NODELIST");
      VS_USER_CHECK(nodes.has_value(),
                    "[launch] under Slurm, set MASTER_ADDR or SLURM_JOB_NODELIST");
      e.master_addr = first_host_of_nodelist(*nodes);
    }
    // Derive the port from the job id so that two jobs on one node do not collide.
    const int job = int_var(env, "SLURM_JOB_ID", 0);
    e.master_port = int_var(env, "MASTER_PORT", 20000 + job % 20000);
    check_rank(e, "SLURM_PROCID", "SLURM_NTASKS");
    return e;
  }
  if (env("OMPI_COMM_WORLD_RANK") && env("OMPI_COMM_WORLD_SIZE")) {
    e.source = "openmpi";
    e.rank = int_var(env, "OMPI_COMM_WORLD_RANK");
    e.world = int_var(env, "OMPI_COMM_WORLD_SIZE");
    e.local_rank = int_var(env, "OMPI_COMM_WORLD_LOCAL_RANK", 0);
    e.local_world = int_var(env, "OMPI_COMM_WORLD_LOCAL_SIZE", 1);
    auto addr = env("MASTER_ADDR");
    VS_USER_CHECK(addr.has_value() || e.local_world == e.world,
                  "[launch] under Open MPI across nodes, set MASTER_ADDR to rank 0's host");
    e.master_addr = addr.value_or("127.0.0.1");
    e.master_port = int_var(env, "MASTER_PORT", kDefaultPort);
    check_rank(e, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE");
    return e;
  }
  return std::nullopt;
}

}  // namespace vescale
