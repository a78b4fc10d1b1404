#include "autoplan/calibration.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <thread>

#include "comm/group.h"
#include "core/thread_budget.h"
#include "mesh/device_mesh.h"

namespace vescale::autoplan {
namespace {

const std::vector<std::string>& calibrated_plans() {
  static const std::vector<std::string> plans = {"megatron-tp", "megatron-sp"};
  return plans;
}

/// The meshes the framework is timed on: every dim of size > 1 as a tp group, all groups of a
/// dim at once as in training, and the world as one more group when the mesh has several dims.
std::vector<DeviceMesh> framework_meshes(const DeviceMesh& mesh, const comm::Group& world) {
  std::vector<DeviceMesh> meshes;
  for (const auto& name : mesh.dim_names())
    if (mesh.size(name) > 1) meshes.push_back(mesh[name]);
  if (mesh.ndim() > 1) meshes.emplace_back(world, MeshSpec{{world.size()}, {"tp"}});
  return meshes;
}

/// This rank's compute and framework figures as one list (the order facts_from_average reads).
std::vector<double> local_figures(const ComputeFacts& mine,
                                  const std::vector<FrameworkTime>& framework) {
  std::vector<double> numbers;
  for (const auto& [flops, rate] : mine.gemm)
    numbers.push_back(rate);
  numbers.insert(numbers.end(), {mine.op_overhead_s, mine.stream_bytes_per_s, mine.block_overhead_s,
                                 mine.model_overhead_s, mine.block_probe_s});
  for (const auto& t : framework) {
    numbers.push_back(t.block_s);
    numbers.push_back(t.model_s);
  }
  return numbers;
}

/// The compute and framework facts from the ranks' averaged figures (`all`, local_figures' order).
void facts_from_average(const at::Tensor& all, const ComputeFacts& mine,
                        const std::vector<DeviceMesh>& framework_on, MachineFacts& facts) {
  const size_t g = mine.gemm.size();
  for (size_t i = 0; i < g; ++i)
    facts.compute.gemm.emplace_back(mine.gemm[i].first, all[i].item<double>());
  facts.compute.op_overhead_s = all[g].item<double>();
  facts.compute.stream_bytes_per_s = all[g + 1].item<double>();
  facts.compute.block_overhead_s = all[g + 2].item<double>();
  facts.compute.model_overhead_s = all[g + 3].item<double>();
  facts.compute.block_probe_s = all[g + 4].item<double>();
  // Per plan and tp degree, the slowest group of that size.
  auto at = static_cast<int64_t>(g) + 5;
  for (const auto& tp_mesh : framework_on) {
    for (const auto& plan : calibrated_plans()) {
      FrameworkTime& t = facts.tp_framework[plan][tp_mesh.numel()];
      t.block_s = std::max(t.block_s, all[at++].item<double>());
      t.model_s = std::max(t.model_s, all[at++].item<double>());
    }
  }
}

/// Latency and bandwidth per collective and group size, through each size's slowest time.
void fit_samples(const std::vector<CommSample>& samples, MachineFacts& facts) {
  std::map<std::pair<std::string, int64_t>, std::map<int64_t, double>> slowest;
  for (const auto& s : samples) {
    double& t = slowest[{s.op, s.group_size}][s.bytes];
    t = std::max(t, s.seconds);
  }
  for (const auto& [key, times] : slowest) {
    std::vector<std::pair<double, double>> points;
    for (const auto& [bytes, seconds] : times)
      points.emplace_back(static_cast<double>(bytes), seconds);
    facts.comm[key.first][key.second] = fit_comm(points);
  }
}

}  // namespace

std::optional<MachineFacts> calibrate_machine(const std::vector<CommSample>& samples,
                                              const DeviceMesh& mesh, const comm::Group& world,
                                              int local_ranks) {
  world.barrier();
  const ComputeFacts mine = measure_compute();
  const std::vector<DeviceMesh> framework_on = framework_meshes(mesh, world);
  std::vector<FrameworkTime> framework;
  for (const auto& tp_mesh : framework_on)
    for (const auto& plan : calibrated_plans())
      framework.push_back(measure_framework(tp_mesh, plan));
  at::Tensor all = at::tensor(local_figures(mine, framework), at::kDouble).to(world.device());
  world.all_reduce(all, comm::ReduceOp::kAvg);
  if (world.rank() != 0) return std::nullopt;
  all = all.cpu();
  MachineFacts facts;
  facts.nproc = world.size();
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  facts.host = host;
  facts.cores = std::thread::hardware_concurrency();
  const ThreadBudget budget = thread_budget_from_env(local_ranks);
  facts.threads =
      fmt::format("{} intra-op and {} BLAS thread(s) per rank", budget.intra_op, budget.blas);
  facts_from_average(all, mine, framework_on, facts);
  fit_samples(samples, facts);
  return facts;
}

}  // namespace vescale::autoplan
