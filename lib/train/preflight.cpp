#include "train/preflight.h"

#include <filesystem>

#include "comm/group.h"
#include "config/memory_estimate.h"
#include "core/device.h"
#include "core/error.h"
#include "core/input_file.h"
#include "mesh/job_mesh.h"
#include "train/data_tokenizer.h"
#include "train/lm_task.h"
#include "train/model_factory.h"
#include "train/parallel_model.h"

namespace vescale {
namespace {

/// The data's files are there: a text file, or a folder with train.bin and val.bin.
void check_data_files(const JobConfig& c) {
  namespace fs = std::filesystem;
  const std::string data_key = fmt::format("config {}: data.path", c.source);
  if (c.data_source == DataSource::kText) require_regular_file(c.data_path, data_key);
  if (c.data_source == DataSource::kTokens) {
    VS_USER_CHECK(fs::is_directory(c.data_path),
                  "{} {}: no such folder (data.source = \"tokens\" reads train.bin and val.bin "
                  "there)",
                  data_key, c.data_path);
    for (const char* name : {"train.bin", "val.bin"})
      require_regular_file((fs::path(c.data_path) / name).string(), data_key);
  }
}

}  // namespace

ResolvedPlan check_layout(const JobConfig& c) {
  auto model = build_model(c);
  if (c.pp > 1) plan_pipeline(c, model_layers(c, *model));
  const Plan plan = job_plan(c);
  const JobMesh job = JobMesh::layout(c.mesh_dims());
  return resolve_plan(plan, *model, job.param_mesh());
}

Preflight preflight(const JobConfig& c, const PreflightOptions& options) {
  Preflight out{check_layout(c), std::nullopt};
  check_data_files(c);
  open_data_tokenizer(c);  // NOTE [The data's tokenizer]
  if (options.scan_data && c.family().objective() == Objective::kNextToken)
    out.tokens = load_job_tokens(c);
  const Device device = parse_device(c.device, 0);
  if (options.local_workers) check_local_workers_fit(c, physical_memory_bytes(), device.is_cpu());
  // NOTE [Ranks sharing a GPU]: NCCL is refused here, before any worker starts.
  const int local_ranks = options.local_workers ? static_cast<int>(c.world_size()) : 1;
  comm::resolve_backend(c.backend, device, check_gpu_sharing(c, local_ranks));
  return out;
}

bool check_gpu_sharing(const JobConfig& c, int local_ranks, int gpus) {
  const bool shares = shares_gpus(c.device, local_ranks, gpus);
  VS_USER_CHECK(!shares || c.unverified_kernels,
                "config {}: {} local ranks would share {} GPU(s) over Gloo with CUDA tensors, a "
                "path no GPU has run yet (NOTE [GPU-verified]): set training.unverified_kernels = "
                "true to take it, or start at most {} ranks a node",
                c.source, local_ranks, gpus, gpus);
  return shares;
}

}  // namespace vescale
