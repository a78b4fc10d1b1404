#include "commands/job_launch.h"

#include <filesystem>
#include <optional>

#include "checkpoint/checkpoint.h"
#include "checkpoint/step_folders.h"
#include "comm/flight_diagnosis.h"
#include "comm/flight_watch.h"
#include "core/device.h"
#include "core/error.h"
#include "core/logging.h"
#include "hf/import.h"
#include "kernels/kernel_table.h"
#include "runtime.h"
#include "test_faults.h"
#include "train/checkpointing.h"
#include "train/model_factory.h"
#include "train/preflight.h"

namespace vescale::app {
namespace {

/// This rank's device (training.device for LOCAL_RANK), made current, with TF32 matmuls when it
/// computes float32 on CUDA (NOTE [Fast paths], NOTE [Kernel table]), and the kernel table told
/// whether to take the rows no GPU has run (NOTE [GPU-verified]).
Device bind_rank_device(const JobConfig& config, const LaunchEnv& env) {
  const Device device = parse_device(config.device, env.local_rank, env.local_world);
  // NOTE [Ranks sharing a GPU]: only opted in; the node's local rank 0 says so, once.
  if (check_gpu_sharing(config, env.local_world) && env.local_rank == 0)
    spdlog::warn("{}", gpu_sharing_warning(env.local_world, cuda_device_count()));
  bind_device(device);
  kernels::set_unverified_kernels(config.unverified_kernels);
  kernels::configure_matmul_precision(device, job_dtype(config));
  return device;
}

/// The world group of a job: its timeout, backend (Gloo where the node's ranks share GPUs) and
/// the device its tensors live on.
comm::GroupOptions world_options(const JobConfig& config, Device device, const LaunchEnv& env) {
  comm::GroupOptions group;
  group.timeout = std::chrono::milliseconds(static_cast<int64_t>(config.timeout_s * 1000));
  group.backend =
      comm::resolve_backend(config.backend, device, check_gpu_sharing(config, env.local_world));
  group.device = device;
  group.stage_on_host = stage_on_host_for_test();
  group.flight_entries = static_cast<size_t>(config.flight_recorder_entries);
  return group;
}

}  // namespace

int64_t launched_world() {
  const std::optional<LaunchEnv> env = detect_launch_env();
  return env ? env->world : 0;
}

std::string mesh_of(const JobConfig& c) {
  return fmt::format("the mesh of {} ({})", c.source, c.mesh_text());
}

void precheck(const JobConfig& c) {
  const bool local = !detect_launch_env();
  preflight(c, PreflightOptions{local && c.world_size() > 1, local});
}

comm::Group connect_job(const JobConfig& config, const LaunchEnv& env) {
  const Device device = bind_rank_device(config, env);
  comm::Group world = connect_world(env, world_options(config, device, env));
  if (world.size() > 1) {
    // NOTE [Flight recorder]: this rank's dump file, without a dump of an earlier run.
    const std::string dump = comm::flight_dump_file(config.dump_folder, env.rank);
    std::error_code ec;
    std::filesystem::remove(dump, ec);
    world.flight()->set_dump_file(dump);
    comm::watch_flight(world.flight());
  }
  const bool staged = world.backend() == comm::Backend::kGloo &&
                      (device.is_cuda() || stage_on_host_for_test()) && world.size() > 1;
  log_rank0("[device] rank 0 computes on {} (training.device = {}), comm backend {}{}; {}{}",
            device.str(), config_name(config.device), comm::backend_name(world.backend()),
            staged ? " (tensors staged through host memory: NOTE [Gloo with CUDA tensors])" : "",
            kernels::fast_paths_summary(device, job_dtype(config)),
            config.unverified_kernels
                ? "; kernel rows no GPU has run are taken (training.unverified_kernels = true)"
                : "");
  return world;
}

std::string open_model_checkpoint(const JobConfig& config, const std::string& path,
                                  const std::string& command) {
  std::string resolved = path;
  if (path == "latest") {
    const std::optional<std::string> newest = newest_checkpoint(config.dump_folder);
    VS_USER_CHECK(
        newest.has_value(),
        "{} --checkpoint=latest: {} holds no committed checkpoint (job.dump_folder of {})", command,
        checkpoints_folder(config.dump_folder).string(), config.source);
    resolved = *newest;
  }
  if (hf::is_hf_path(resolved)) {
    hf::HFWeights{resolved, config};  // config.json and the tensors' shapes checked
  } else {
    CheckpointReader{resolved};
  }
  return resolved;
}

}  // namespace vescale::app
