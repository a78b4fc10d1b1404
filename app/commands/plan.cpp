// `vescale-train plan list | show NAME [--tp N] | lint CONFIG.toml | schedule CONFIG.toml`.
#include <cstdio>

#include <fmt/ranges.h>

#include "autoplan/muon_cost.h"
#include "commands/commands.h"
#include "config/expert_volume.h"
#include "config/job_config.h"
#include "config/memory_estimate.h"
#include "config/ring_volume.h"
#include "core/error.h"
#include "core/units.h"
#include "dmodule/parallelize.h"
#include "mesh/job_mesh.h"
#include "parallel/pipeline/schedule.h"
#include "parallel/pipeline/stage_split.h"
#include "train/lm_task.h"
#include "train/model_factory.h"
#include "train/muon_params.h"
#include "train/parallel_model.h"
#include "train/preflight.h"
#include "train/task.h"

namespace vescale::app {
namespace {

struct PlanOptions {
  std::string name;
  int64_t tp = 0;
  std::string config;
};

/// The resolved plan table of `config`'s model on rank 0 of a layout-only job mesh (the plan
/// applies to its parameter mesh).
std::string resolved_table(const JobConfig& config, const Plan& plan) {
  auto model = build_model(config);
  const JobMesh job = JobMesh::layout(config.mesh_dims());
  const ResolvedPlan resolved = resolve_plan(plan, *model, job.param_mesh());
  return describe_plan(resolved, job.param_mesh(), job_dtype(config));
}

/// `config`'s pipeline: its stage split, the schedule's per-rank timeline and its bubble. Builds
/// the model without allocating it and loads no data.
std::string schedule_report(const JobConfig& config) {
  auto model = build_model(config);
  const std::vector<Layer> layers = model_layers(config, *model);
  const PipelinePlan pipe = plan_pipeline(config, layers);
  const pipeline::PipelineSchedule& schedule = pipe.schedule;
  const std::vector<pipeline::Stage>& stages = pipe.stages;
  const pipeline::Simulation sim = pipeline::simulate(schedule);

  double total = 0;
  for (const auto& st : stages)
    total += st.cost;
  std::string out = fmt::format("{}: {} over pp = {} x {} stage(s) per rank, split {}\n\n",
                                config.source, config.model, config.pp, config.pp_virtual,
                                config.pp_split == std::vector<std::string>{"balanced"}
                                    ? "balanced"
                                    : fmt::format("at {}", fmt::join(config.pp_split, ", ")));
  out += fmt::format("{:<6} {:<5} {:<40} {:>11} {:>14} {:>6} {:>9}\n", "stage", "rank", "layers",
                     "parameters", "MFLOP/sample", "share", "in flight");
  for (size_t k = 0; k < stages.size(); ++k) {
    const pipeline::Stage& st = stages[k];
    const std::string names =
        st.names.size() == 1 ? st.names[0] : st.names.front() + " .. " + st.names.back();
    out +=
        fmt::format("{:<6} {:<5} {:<40} {:>11} {:>14.1f} {:>5.1f}% {:>9}\n", k,
                    schedule.stage_rank[k], names, parameters_under(*model, pipe.modules[k]),
                    st.cost / 1e6, total > 0 ? 100.0 * st.cost / total : 0.0, sim.peak_stashed[k]);
  }
  out +=
      "(parameters: each counted once, where first used: a weight two stages share counts on "
      "the first)\n";
  out += fmt::format(
      "\nschedule {}: {} micro-batches; time units: F = 1, B = 2 (I = W = 1) per stage\n",
      schedule.name, schedule.microbatches);
  out += pipeline::timeline(schedule, sim);
  out += fmt::format(
      "\nbubble {:.6f} (simulated: idle / (pp x makespan) = idle / ({} x {})); formula {} = "
      "{:.6f}\n",
      sim.bubble, schedule.pp, sim.makespan, pipeline::bubble_formula(schedule.name),
      pipeline::analytic_bubble(schedule.name, schedule.pp, schedule.virtual_stages,
                                schedule.microbatches));
  return out;
}

/// Under context parallelism: which tokens a rank holds and what its ring sends per step.
std::string context_parallel_line(const JobConfig& config) {
  if (config.cp == 1) return "";
  const int64_t chunk = config.seq_len / (2 * config.cp);
  const RingVolume ring = ring_volume(config);
  return fmt::format(
      "context parallel: cp = {}: cp rank r holds tokens [r x {}, (r + 1) x {}) and [({} - r) x "
      "{}, ({} - r) x {}) of each {}-token sequence; ring attention sends {:.0f} B of keys and "
      "values per step from a rank of the first stage ({:.0f} attention calls x 3 x (cp - 1) x "
      "{:.0f} B{})\n",
      config.cp, chunk, chunk, 2 * config.cp - 1, chunk, 2 * config.cp, chunk, config.seq_len,
      ring.send_bytes_per_step, ring.calls, ring.kv_pair_bytes,
      config.activation_checkpoint == Recompute::kFull ? ", and the reruns of full recompute" : "");
}

/// For a mixture of experts: which experts a rank holds, their state and the rest's per rank, and
/// (ep > 1) what its all-to-alls send per step (NOTE [Expert parallelism]).
std::string expert_parallel_line(const JobConfig& config) {
  const int64_t experts = config.family().experts_per_layer(config.model_spec());
  if (experts == 0) return "";
  const MemoryEstimate m = estimate_memory(config);
  std::string out = fmt::format(
      "experts: a rank holds {} of the {} experts of each MoE layer (parallel.ep = {}): {:.0f} of "
      "the model's {:.0f} expert parameters; state per rank (the model even over pp x tp, "
      "parallel.zero = {}): {} of the experts' over their dp x cp / ep = {} replicas, {} of the "
      "rest over dp x cp = {}\n",
      experts / config.ep, experts, config.ep, m.expert_parameters / static_cast<double>(config.ep),
      m.expert_parameters, config.zero, format_bytes(m.expert_state_per_rank_bytes),
      config.dp * config.cp / config.ep, format_bytes(m.dense_state_per_rank_bytes),
      config.dp * config.cp);
  if (config.ep == 1) return out;
  const ExpertVolume v = expert_volume(config);
  return out + fmt::format(
                   "expert parallel: the all-to-alls over ep send {:.0f} B per step from a rank of "
                   "the first stage, balanced routing ({:.0f} MoE layer calls x (ep - 1) / ep x "
                   "({:g} x {:.0f} rows of {:.0f} B + {:g} x {:.0f} B of counts){})\n",
                   v.send_bytes_per_step, v.calls, v.row_exchanges, v.routed_rows, v.row_bytes,
                   v.count_exchanges, v.count_bytes,
                   config.activation_checkpoint == Recompute::kFull
                       ? ", with the reruns of full recompute"
                       : "");
}

/// Under Muon: which matrices it updates, what rank 0 orthogonalizes and what its exchanges send
/// per step (NOTE [Muon exchange]), the bytes the metrics line counts under each dim.
std::string muon_line(const JobConfig& config) {
  if (config.optimizer != OptimizerKind::kMuon) return "";
  const std::vector<autoplan::MuonCost> costs =
      autoplan::muon_cost_by_rank(config, autoplan::layout_model(config));
  const autoplan::MuonCost& rank0 = costs.front();
  const double job_flops = muon_flops_per_step(config);
  if (job_flops == 0)
    return fmt::format(
        "muon: model.name = \"{}\" has no 2-D weights outside optimizer.adamw_params = [{}]: "
        "AdamW updates every parameter\n",
        config.model, fmt::join(config.adamw_params, ", "));
  std::string out = fmt::format(
      "muon: {:.4g} GFLOP of Newton-Schulz a step over the model's matrices (counted in mfu; "
      "optimizer.adamw_params = [{}] take AdamW); rank 0 holds pieces of {} and orthogonalizes "
      "{} of them ({:.4g} GFLOP)",
      job_flops / 1e9, fmt::join(config.adamw_params, ", "), rank0.matrices, rank0.owned,
      rank0.owned_flops / 1e9);
  if (rank0.calls.empty()) return out + ": every matrix whole on its rank, nothing moves\n";
  std::vector<std::string> dims;
  for (const auto& [dim, calls] : rank0.calls)
    dims.push_back(fmt::format("{} ({} B) over {} in {} all-to-alls",
                               format_bytes(static_cast<double>(rank0.sent_bytes.at(dim))),
                               rank0.sent_bytes.at(dim), dim, calls));
  return out + fmt::format("; its exchanges send {} per step\n", fmt::join(dims, ", "));
}

void add_plan_list(CLI::App& plan) {
  plan.add_subcommand("list", "List the zoo plans with their descriptions")->callback([] {
    for (const auto& name : plan_zoo_names()) {
      print(fmt::format("{:<22} {}\n", name, Plan::load(name).description));
    }
    print(fmt::format("(zoo folder: {})\n", plan_zoo_dir()));
  });
}

void add_plan_show(CLI::App& plan, const std::shared_ptr<PlanOptions>& options) {
  CLI::App* show = plan.add_subcommand("show",
                                       "Print a plan's rules; with --tp N, what it does to its "
                                       "model's parameters on rank 0 of tp=N");
  show->add_option("name", options->name, "Zoo name (gpt/megatron-sp) or plan file")->required();
  show->add_option("--tp", options->tp, "Tensor-parallel degree to resolve the plan on")
      ->check(CLI::Range(1, 4096));
  show->add_option("--config", options->config,
                   "Job config whose model to use (default: the default model)");
  show->callback([options] {
    const Plan p = Plan::load(options->name);
    print(fmt::format("{} ({}): {}\n", options->name, p.source, p.description));
    for (const auto& r : p.parameter)
      print(fmt::format("  parameter {:<40} {}\n", r.key, placements_str(r.placements)));
    for (const auto& r : p.forward) {
      std::vector<std::string> lists;
      for (const auto& pl : r.placements)
        lists.push_back(placements_str(pl));
      print(fmt::format("  forward   {:<40} {}\n", r.key, fmt::join(lists, ", ")));
    }
    if (options->tp > 0) {
      std::vector<std::string> overrides = {
          fmt::format("parallel.tp={}", options->tp),
          fmt::format("model.name=\"{}\"",
                      p.model.empty() ? model_family_names().front() : p.model)};
      const JobConfig config = options->config.empty()
                                   ? JobConfig::parse("", "(defaults)", overrides)
                                   : JobConfig::load(options->config, overrides);
      print("\n" + resolved_table(config, p));
    }
  });
}

void add_plan_lint(CLI::App& plan, const std::shared_ptr<PlanOptions>& options) {
  CLI::App* lint = plan.add_subcommand("lint",
                                       "Check a job config's plan against its model and mesh "
                                       "before any compute: errors and warnings");
  lint->add_option("config", options->config, "Job config (TOML)")->required();
  lint->allow_extras();
  lint->callback([options, lint] {
    const JobConfig config = JobConfig::load(options->config, collect_overrides(lint->remaining()));
    // What train would refuse, before anything is printed.
    const Preflight checked = preflight(config, PreflightOptions{});
    std::string data_line;
    if (checked.tokens) {
      const TokenData& data = *checked.tokens;
      data_line = fmt::format(
          "data: {}: {} validation windows of {} tokens (eval.windows = {})\n", data.description,
          val_rows_available(*data.val, data.val_starts,
                             !config.sft_pack && data.val_mask != nullptr, config.seq_len),
          config.seq_len, config.eval_windows);
    }
    const std::vector<std::string>& warnings = checked.plan.warnings;
    print(describe_plan(checked.plan, JobMesh::layout(config.mesh_dims()).param_mesh(),
                        job_dtype(config)));
    for (const auto& w : warnings)
      print("warning: " + w + "\n");
    print(data_line);
    print(context_parallel_line(config));
    print(expert_parallel_line(config));
    print(muon_line(config));
    print(fmt::format("ok: {} on {} with plan {} ({} warnings)\n", config.model,
                      fmt::format("tp={}", config.tp),
                      config.plan.empty() ? "(replicate)" : config.plan, warnings.size()));
  });
}

void add_plan_schedule(CLI::App& plan, const std::shared_ptr<PlanOptions>& options) {
  CLI::App* schedule = plan.add_subcommand(
      "schedule",
      "Show a job's pipeline: the stage split (parallel.pp_split), the per-rank timeline of "
      "parallel.pp_schedule over parallel.microbatches micro-batches, and its bubble");
  schedule->add_option("config", options->config, "Job config (TOML)")->required();
  schedule->allow_extras();
  schedule->callback([options, schedule] {
    print(schedule_report(
        JobConfig::load(options->config, collect_overrides(schedule->remaining()))));
  });
}

}  // namespace

void add_plan_command(CLI::App& app, const Invocation&) {
  auto options = std::make_shared<PlanOptions>();
  CLI::App* plan = app.add_subcommand(
      "plan",
      "The sharding plan zoo: list plans, show one, lint a job's plan; a job's pipeline schedule");
  plan->require_subcommand(1);
  add_plan_list(*plan);
  add_plan_show(*plan, options);
  add_plan_lint(*plan, options);
  add_plan_schedule(*plan, options);
  add_plan_auto_command(*plan);
}

}  // namespace vescale::app
