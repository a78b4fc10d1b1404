#include "autoplan/machine_facts.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "dmodule/parallelize.h"
#include "dmodule/plan.h"
#include "dtensor/dtensor.h"
#include "family/model_family.h"
#include "mesh/device_mesh.h"
#include "train/metrics.h"

namespace vescale::autoplan {

double ComputeFacts::gemm_rate(double flops) const {
  VS_CHECK(!gemm.empty(), "[plan auto] no matmul rates were measured");
  if (flops <= gemm.front().first) return gemm.front().second;
  if (flops >= gemm.back().first) return gemm.back().second;
  for (size_t i = 1; i < gemm.size(); ++i) {
    if (flops > gemm[i].first) continue;
    const auto [f0, r0] = gemm[i - 1];
    const auto [f1, r1] = gemm[i];
    const double t = std::log(flops / f0) / std::log(f1 / f0);
    return std::exp(std::log(r0) + t * (std::log(r1) - std::log(r0)));
  }
  return gemm.back().second;
}

const CommFit& MachineFacts::fit(const std::string& op, int64_t size) const {
  const auto by_op = comm.find(op);
  VS_CHECK(by_op != comm.end(), "[plan auto] the calibration has no {} figures", op);
  const auto by_size = by_op->second.find(size);
  VS_CHECK(by_size != by_op->second.end(),
           "[plan auto] the calibration has no {} figures for a group of {}", op, size);
  return by_size->second;
}

FrameworkTime MachineFacts::framework(int64_t tp, bool sp) const {
  if (tp == 1) return {compute.block_overhead_s, compute.model_overhead_s};
  const std::string plan = sp ? "megatron-sp" : "megatron-tp";
  const auto by_plan = tp_framework.find(plan);
  VS_CHECK(by_plan != tp_framework.end() && by_plan->second.count(tp),
           "[plan auto] the calibration has no framework time for {} at tp = {}", plan, tp);
  return by_plan->second.at(tp);
}

std::string MachineFacts::to_json() const {
  nlohmann::json j;
  j["format"] = "vescale-train plan auto calibration 2";
  j["nproc"] = nproc;
  j["host"] = host;
  j["cores"] = cores;
  j["threads"] = threads;
  for (const auto& [flops, rate] : compute.gemm)
    j["compute"]["gemm"].push_back({{"flops", flops}, {"flops_per_s", rate}});
  j["compute"]["op_overhead_s"] = compute.op_overhead_s;
  j["compute"]["block_overhead_s"] = compute.block_overhead_s;
  j["compute"]["model_overhead_s"] = compute.model_overhead_s;
  j["compute"]["block_probe_s"] = compute.block_probe_s;
  j["compute"]["stream_bytes_per_s"] = compute.stream_bytes_per_s;
  for (const auto& [op, sizes] : comm)
    for (const auto& [size, f] : sizes)
      j["comm"][op][std::to_string(size)] = {{"alpha_s", f.alpha_s},
                                             {"bytes_per_s", f.bytes_per_s}};
  for (const auto& [plan, sizes] : tp_framework)
    for (const auto& [size, t] : sizes)
      j["tp_framework"][plan][std::to_string(size)] = {{"block_s", t.block_s},
                                                       {"model_s", t.model_s}};
  return j.dump(1) + "\n";
}

namespace {

/// `v` (a figure of the calibration file named `what`), unless it is outside [lo, hi]: a
/// measurement gives neither NaN nor infinity, nor a rate so small that a prediction divided by
/// it overflows.
double facts_number(double v, const std::string& what, double lo, double hi) {
  VS_USER_CHECK(v >= lo && v <= hi, "{} is {}, outside the measurable [{}, {}]", what, v, lo, hi);
  return v;
}
/// Seconds: up to a million.
double facts_time(const nlohmann::json& j, const char* key, const std::string& where) {
  return facts_number(j.at(key).get<double>(), where + key, 0, 1e6);
}
/// FLOPs, FLOP/s, bytes/s: at least one, at most 10^18.
double facts_rate(const nlohmann::json& j, const char* key, const std::string& where) {
  return facts_number(j.at(key).get<double>(), where + key, 1, 1e18);
}

/// A group size as the file's key names it: all digits, 2 or more.
int64_t facts_group_size(const std::string& key, const std::string& where) {
  int64_t size = 0;
  const auto [end, err] = std::from_chars(key.data(), key.data() + key.size(), size);
  VS_USER_CHECK(err == std::errc() && end == key.data() + key.size() && size >= 2,
                "{}: group size '{}' is not a number of ranks of 2 or more", where, key);
  return size;
}

}  // namespace

MachineFacts MachineFacts::from_json(const std::string& text, const std::string& source) {
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    VS_USER_CHECK(j.value("format", "") == "vescale-train plan auto calibration 2",
                  "not a calibration of this format");
    MachineFacts f;
    f.nproc = j.at("nproc").get<int64_t>();
    f.host = j.at("host").get<std::string>();
    f.cores = j.at("cores").get<int64_t>();
    VS_USER_CHECK(f.nproc >= 1 && f.cores >= 1, "nproc {} and cores {} must be 1 or more", f.nproc,
                  f.cores);
    f.threads = j.value("threads", "");
    const nlohmann::json& compute = j.at("compute");
    for (const auto& g : compute.at("gemm")) {
      f.compute.gemm.emplace_back(facts_rate(g, "flops", "compute.gemm."),
                                  facts_rate(g, "flops_per_s", "compute.gemm."));
      VS_USER_CHECK(
          f.compute.gemm.size() < 2 || f.compute.gemm.back().first > f.compute.gemm.end()[-2].first,
          "compute.gemm is not by increasing flops");
    }
    f.compute.op_overhead_s = facts_time(compute, "op_overhead_s", "compute.");
    f.compute.block_overhead_s = facts_time(compute, "block_overhead_s", "compute.");
    f.compute.model_overhead_s = facts_time(compute, "model_overhead_s", "compute.");
    f.compute.block_probe_s = facts_time(compute, "block_probe_s", "compute.");
    f.compute.stream_bytes_per_s = facts_rate(compute, "stream_bytes_per_s", "compute.");
    // One rank has no groups to measure: no "comm".
    const nlohmann::json comm = j.value("comm", nlohmann::json::object());
    for (const auto& [op, sizes] : comm.items()) {
      for (const auto& [size, fit] : sizes.items()) {
        const std::string where = "comm." + op + "." + size + ".";
        f.comm[op][facts_group_size(size, "comm." + op)] = {facts_time(fit, "alpha_s", where),
                                                            facts_rate(fit, "bytes_per_s", where)};
      }
    }
    if (j.contains("tp_framework")) {
      for (const auto& [plan, sizes] : j.at("tp_framework").items()) {
        for (const auto& [size, t] : sizes.items()) {
          const std::string where = "tp_framework." + plan + "." + size + ".";
          f.tp_framework[plan][facts_group_size(size, "tp_framework." + plan)] = {
              facts_time(t, "block_s", where), facts_time(t, "model_s", where)};
        }
      }
    }
    VS_USER_CHECK(!f.compute.gemm.empty(), "no compute figures");
    return f;
  } catch (const UserError& e) {
    throw UserError(
        fmt::format("[plan auto] {}: {} (delete it to calibrate again)", source, e.what()));
  } catch (const std::exception& e) {
    throw UserError(
        fmt::format("[plan auto] {}: not a calibration file ({}); delete it to "
                    "calibrate again",
                    source, e.what()));
  }
}

namespace {

/// Seconds per call of `fn`, run for at least `budget_s` after one warm-up call.
template <typename F>
double seconds_per_call(F&& fn, double budget_s) {
  fn();
  int64_t calls = 0;
  const auto start = std::chrono::steady_clock::now();
  double elapsed = 0;
  while (elapsed < budget_s || calls < 3) {
    fn();
    ++calls;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return elapsed / static_cast<double>(calls);
}

/// Seconds per call of `fn` over exactly `calls` calls after one warm-up call: what a
/// collective measurement needs (every rank makes the same calls).
template <typename F>
double seconds_per_calls(F&& fn, int calls) {
  fn();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i)
    fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / calls;
}

/// Seconds of one forward and backward of a GPT with `n_layer` blocks on `mesh` under `plan`
/// (empty: replicate); a 1-rank mesh runs for a time budget, a larger one a fixed count.
double gpt_seconds(const DeviceMesh& mesh, const GptProbe& probe, int64_t n_layer,
                   const std::string& plan = "") {
  const std::string family = "gpt";  // the calibration's reference model (kBlockProbe)
  const ModelFamily& gpt = model_family(family);
  ModelSpec spec;
  for (const FamilyKey& k : gpt.keys())
    spec.keys.set(k.name, k.default_value);
  spec.keys.set("vocab_size", int64_t{64});
  spec.keys.set("block_size", probe.seq_len);
  spec.keys.set("n_layer", n_layer);
  spec.keys.set("n_head", probe.n_head);
  spec.keys.set("n_embd", probe.n_embd);
  spec.keys.set("dropout", 0.0);
  spec.keys.set("vocab_multiple", int64_t{1});
  spec.tp = mesh.numel();
  spec.seq_len = probe.seq_len;
  const int64_t tp = spec.tp;
  auto pm = parallelize_module(gpt.build(spec), mesh,
                               plan.empty() ? replicate_plan("gpt") : Plan::load("gpt/" + plan),
                               ParallelizeOptions{});
  const Placements r{Placement::replicate()};
  const int64_t t = probe.seq_len;
  // On the mesh's device, as the model's parameters (a CUDA mesh's embedding takes CUDA ids).
  const auto on_device = at::dtype(at::kLong).device(mesh.device());
  const at::Tensor tokens = at::arange(probe.batch * (t + 1), on_device).view({probe.batch, t + 1});
  const at::Tensor ids = tokens.remainder(64);
  const DTensor idx = distribute_tensor(ids.narrow(1, 0, t).contiguous(), mesh, r);
  const DTensor targets = distribute_tensor(ids.narrow(1, 1, t).contiguous(), mesh, r);
  auto step = [&] {
    const DTensor loss = pm->module()({idx, targets}).at(0);
    loss.redistribute(Placements(mesh.ndim(), Placement::replicate())).to_local().backward();
    pm->zero_grad();
  };
  return tp == 1 ? seconds_per_call(step, 0.15) : seconds_per_calls(step, 12);
}

}  // namespace

ComputeFacts measure_compute() {
  ComputeFacts facts;
  for (int64_t n : {32, 64, 128, 256, 512})
    facts.gemm.emplace_back(2.0 * static_cast<double>(n * n * n), measured_matmul_flops(n, 0.12));
  const at::Tensor tiny = at::ones({16});
  facts.op_overhead_s = seconds_per_call([&] { (void)at::add(tiny, tiny); }, 0.05);
  const at::Tensor big = at::ones({int64_t{4} << 20});
  const double s = seconds_per_call([&] { (void)at::add(big, big); }, 0.15);
  facts.stream_bytes_per_s = 3.0 * static_cast<double>(big.nbytes()) / s;
  const comm::Group alone = comm::Group::create(comm::Store::in_memory(), 0, 1);
  const DeviceMesh mesh(alone, MeshSpec{{1}, {"tp"}});
  const FrameworkTime framework = measure_framework(mesh, "");
  facts.block_overhead_s = framework.block_s;
  facts.model_overhead_s = framework.model_s;
  const GptProbe& probe = kBlockProbe;
  facts.block_probe_s =
      std::max(0.0, (gpt_seconds(mesh, probe, 3) - gpt_seconds(mesh, probe, 1)) / 2.0);
  return facts;
}

FrameworkTime measure_framework(const DeviceMesh& mesh, const std::string& plan) {
  const int64_t tp = mesh.numel();
  const int64_t heads = tp * std::max<int64_t>(1, 2 / tp);
  const GptProbe smallest{1, 8, heads, 8 * heads};
  const double one = gpt_seconds(mesh, smallest, 1, plan);
  const double three = gpt_seconds(mesh, smallest, 3, plan);
  FrameworkTime t;
  t.block_s = std::max(0.0, (three - one) / 2.0);
  t.model_s = std::max(0.0, one - t.block_s);
  return t;
}

CommFit fit_comm(const std::vector<std::pair<double, double>>& points) {
  VS_CHECK(points.size() >= 2, "[plan auto] a latency and bandwidth fit needs two sizes");
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& [x, y] : points) {
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  const double n = static_cast<double>(points.size());
  const double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
  const double intercept = (sy - slope * sx) / n;
  CommFit fit;
  fit.bytes_per_s = slope > 0 ? 1.0 / slope : 1e30;
  fit.alpha_s = std::max(0.0, intercept);
  return fit;
}

}  // namespace vescale::autoplan
