// Where this process stands in a job: rank and world from torchrun, Slurm or Open MPI variables.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace vescale {

struct LaunchEnv {
  int rank = 0;
  int world = 1;
  int local_rank = 0;
  int local_world = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  /// Who started us: "torchrun", "slurm", "openmpi" or "local" (our own launcher).
  std::string source;
  /// torchrun's agent already serves the TCP store at MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE):
  /// every rank connects as a client, under a namespace per restart (TORCHELASTIC_RESTART_COUNT).
  bool agent_store = false;
  int restart_count = 0;
  /// Our local launcher's rendezvous: a file store in a folder only this user can read
  /// (VESCALE_STORE_FILE), so no port is opened; empty elsewhere.
  std::string store_file;

  /// "rank 1/4 (local 1/4) via torchrun, rendezvous 127.0.0.1:29500".
  std::string str() const;
};

/// Looks a variable up; the default reads the process environment.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
std::optional<std::string> process_env(const std::string& name);

/// The job position given by the environment, or nullopt when no launcher set one.
/// Order: torchrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT; also our local launcher, which
/// sets the same and VESCALE_LAUNCHER=local), then Slurm (SLURM_PROCID, SLURM_NTASKS; master:
/// MASTER_ADDR or the first host of SLURM_JOB_NODELIST), then Open MPI (OMPI_COMM_WORLD_*).
/// Throws UserError naming the variable when one is malformed or missing.
std::optional<LaunchEnv> detect_launch_env(const EnvLookup& env = process_env);

/// First host of a Slurm node list: "gpu[07-09,12],cpu1" -> "gpu07".
std::string first_host_of_nodelist(const std::string& nodelist);

}  // namespace vescale
