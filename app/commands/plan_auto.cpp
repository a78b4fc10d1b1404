// `vescale-train plan auto CONFIG.toml --nproc N`: every layout of N ranks, ranked by the cost
// model's step time (NOTE [Plan auto]); calibrates the machine first (cached in the dump
// folder); `-o` writes the winner's config, `--verify K` runs the top K and compares.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "autoplan/cost_model.h"
#include "autoplan/layout.h"
#include "autoplan/machine_facts.h"
#include "commands/commands.h"
#include "config/job_config.h"
#include "config/memory_estimate.h"
#include "core/device.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/safe_files.h"
#include "core/units.h"

namespace vescale::app {
namespace {

namespace fs = std::filesystem;
using autoplan::Layout;
using autoplan::MachineFacts;
using autoplan::Prediction;

/// The first line of every config plan auto writes.
constexpr const char* kWrittenBy = "# plan auto:";

struct AutoOptions {
  std::string config;
  int64_t nproc = 0;
  std::string memory_per_rank;
  int64_t top = 10;
  std::string output;
  bool explain = false;
  int64_t verify = 0;
  int64_t verify_steps = 12;
  bool recalibrate = false;
  bool overwrite = false;
};

/// Whether `path` is a config plan auto wrote (NOTE [Foreign outputs]): its first line is ours.
bool written_by_plan_auto(const fs::path& path) {
  std::ifstream in(path);
  std::string first;
  std::getline(in, first);
  return first.rfind(kWrittenBy, 0) == 0;
}

/// Meshes whose dims and world cover every group size a layout of `nproc` ranks can have.
std::vector<std::string> calibration_meshes(int64_t nproc) {
  std::set<int64_t> needed;
  for (int64_t g = 2; g < nproc; ++g)
    if (nproc % g == 0) needed.insert(g);
  std::vector<std::string> meshes;
  while (!needed.empty()) {
    const int64_t g = *needed.begin();
    meshes.push_back(fmt::format("outer={},inner={}", nproc / g, g));
    needed.erase(g);
    needed.erase(nproc / g);
  }
  if (meshes.empty()) meshes.push_back(fmt::format("world={}", nproc));
  return meshes;
}

/// Where the calibration of `nproc` ranks is cached.
fs::path calibration_cache(const JobConfig& base, int64_t nproc) {
  return fs::path(base.dump_folder) / "plan-auto" / fmt::format("calibration-{}-ranks.json", nproc);
}

/// The machine facts for `nproc` ranks: from the cache in the dump folder, or measured now by
/// `comm bench --calibrate` on real processes (`again`: measured now in any case).
MachineFacts calibrate(const JobConfig& base, int64_t nproc, bool again) {
  const fs::path cache = calibration_cache(base, nproc);
  const fs::path folder = cache.parent_path();
  if (!again && fs::exists(cache)) {
    print(fmt::format("calibration: {} (--recalibrate to measure again)\n", cache.string()));
    return MachineFacts::from_json(read_input_file(cache.string(), "calibration"), cache.string());
  }
  make_folder(folder);
  MachineFacts facts;
  const std::vector<std::string> meshes = calibration_meshes(nproc);
  // A mixture of experts' ep all-to-alls are priced at all_to_all's own figures.
  std::string ops = "all_reduce,all_gather,reduce_scatter,send_recv";
  if (base.family().experts_per_layer(base.model_spec()) > 0) ops += ",all_to_all";
  for (size_t i = 0; i < meshes.size(); ++i) {
    const fs::path part = folder / fmt::format("calibration-{}-ranks.part{}.json", nproc, i);
    print(fmt::format("calibration {} of {}: comm bench on {} processes, mesh {}\n", i + 1,
                      meshes.size(), nproc, meshes[i]));
    const int code =
        run_this_binary({"comm", "bench", "--nproc", std::to_string(nproc), "--mesh", meshes[i],
                         "--ops", ops, "--sizes", "16K,256K,2M", "--calibrate", part.string()});
    VS_USER_CHECK(code == 0,
                  "[plan auto] the calibration run (comm bench --mesh {}) failed with "
                  "exit code {}",
                  meshes[i], code);
    MachineFacts measured =
        MachineFacts::from_json(read_input_file(part.string(), "calibration"), part.string());
    fs::remove(part);
    if (i == 0) {
      facts = measured;
    } else {
      for (const auto& [op, sizes] : measured.comm)
        for (const auto& [size, fit] : sizes)
          facts.comm[op].emplace(size, fit);
      for (const auto& [plan, sizes] : measured.tp_framework)
        for (const auto& [size, t] : sizes)
          facts.tp_framework[plan].emplace(size, t);
    }
  }
  write_text_atomically(cache, facts.to_json());
  print(fmt::format("calibration written to {}\n", cache.string()));
  return facts;
}

std::string ms(double seconds) {
  return fmt::format("{:.1f}", seconds * 1e3);
}
std::string mib(double bytes) {
  return fmt::format("{:.1f}", bytes / (1024.0 * 1024.0));
}

std::string table(const std::vector<Prediction>& ranked, size_t rows) {
  std::string out = fmt::format(
      "{:>4}  {:<46} {:>9} {:>9} {:>8} {:>8}  {:>8} {:>8} {:>8} {:>8} {:>9}\n", "rank", "layout",
      "step ms", "compute", "comm", "bubble", "params", "grads", "optim", "activ", "total MiB");
  for (size_t i = 0; i < std::min(rows, ranked.size()); ++i) {
    const Prediction& p = ranked[i];
    out += fmt::format("{:>4}  {:<46} {:>9} {:>9} {:>8} {:>8}  {:>8} {:>8} {:>8} {:>8} {:>9}\n",
                       i + 1, p.layout.str(), ms(p.step_s()), ms(p.compute_s), ms(p.comm_s),
                       ms(p.bubble_s), mib(p.state.params), mib(p.state.grads),
                       mib(p.state.optimizer), mib(p.activations), mib(p.memory()));
  }
  return out;
}

/// Spearman's rank correlation of two lists (no ties expected; ties get their order).
double rank_correlation(const std::vector<double>& a, const std::vector<double>& b) {
  const size_t n = a.size();
  if (n < 2) return 1.0;
  auto ranks = [n](const std::vector<double>& v) {
    std::vector<size_t> order(n);
    for (size_t i = 0; i < n; ++i)
      order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return v[x] < v[y]; });
    std::vector<double> r(n);
    for (size_t i = 0; i < n; ++i)
      r[order[i]] = static_cast<double>(i);
    return r;
  };
  const auto ra = ranks(a), rb = ranks(b);
  double d2 = 0;
  for (size_t i = 0; i < n; ++i)
    d2 += (ra[i] - rb[i]) * (ra[i] - rb[i]);
  const double nn = static_cast<double>(n);
  return 1.0 - 6.0 * d2 / (nn * (nn * nn - 1.0));
}

struct Measured {
  double step_s = 0;
  double state = 0, activations = 0, rss = 0;  // rank 0
};

/// Trains `layout` for `steps` steps in a scratch folder and reads its metrics: the median step
/// time after the first two steps, and rank 0's state, activations and resident memory. A LoRA
/// job (`lora`) keeps its checkpoint.load, its base (NOTE [LoRA]); any other starts afresh.
Measured measure(const AutoOptions& o, const Layout& layout, const std::vector<std::string>& extra,
                 const fs::path& folder, bool lora) {
  fs::remove_all(folder);
  std::vector<std::string> args = {"train", o.config, "--nproc", std::to_string(o.nproc)};
  for (const auto& e : extra)
    args.push_back(e);
  for (const auto& ov : layout.overrides())
    args.push_back("--" + ov);
  for (const std::string& ov :
       {fmt::format("training.steps={}", o.verify_steps), std::string("metrics.log_interval=1"),
        std::string("checkpoint.interval=0"), std::string("checkpoint.load=\"\""),
        std::string("checkpoint.overwrite=true"), fmt::format("eval.interval={}", o.verify_steps),
        std::string("eval.windows=1"), fmt::format("job.dump_folder=\"{}\"", folder.string())}) {
    if (lora && ov.rfind("checkpoint.load=", 0) == 0) continue;
    args.push_back("--" + ov);
  }
  const int code = run_this_binary(args);
  VS_USER_CHECK(code == 0, "[plan auto] --verify: training {} failed with exit code {}",
                layout.str(), code);
  std::ifstream in(folder / "metrics.jsonl");
  std::vector<double> times;
  Measured m;
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("step_time_s")) continue;
    if (j.value("step", 0) > 2) times.push_back(j["step_time_s"].get<double>());
    if (j.contains("state_bytes")) {
      double state = 0;
      for (const auto& [kind, bytes] : j["state_bytes"].items()) {
        if (kind == "activations")
          m.activations = std::max(m.activations, bytes.get<double>());
        else
          state += bytes.get<double>();
      }
      m.state = std::max(m.state, state);
    }
    m.rss = std::max(m.rss, j.value("mem_bytes", 0.0));
  }
  VS_CHECK(!times.empty(), "[plan auto] --verify: {} wrote no step times", layout.str());
  std::sort(times.begin(), times.end());
  m.step_s = times[times.size() / 2];
  return m;
}

void verify(const AutoOptions& o, const JobConfig& base, const std::vector<Prediction>& ranked,
            const std::vector<std::string>& extra) {
  const size_t k = std::min<size_t>(static_cast<size_t>(o.verify), ranked.size());
  const fs::path folder = fs::path(base.dump_folder) / "plan-auto" / "verify";
  std::vector<double> predicted, measured;
  std::string out = fmt::format(
      "\nverify: the top {} trained {} steps each on {} processes (median step time after "
      "step 2; memory: rank 0's state + activations as the trainer counts them)\n",
      k, o.verify_steps, o.nproc);
  out += fmt::format("{:>4}  {:<46} {:>10} {:>10} {:>7}  {:>10} {:>10} {:>9}\n", "rank", "layout",
                     "pred ms", "meas ms", "error", "pred MiB", "meas MiB", "RSS MiB");
  std::vector<std::string> lines;
  for (size_t i = 0; i < k; ++i) {
    print(fmt::format("verify {} of {}: {}\n", i + 1, k, ranked[i].layout.str()));
    const Measured m = measure(o, ranked[i].layout, extra, folder, base.lora_rank > 0);
    const auto stage0 =
        autoplan::state_memory_by_stage(autoplan::layout_config(base, ranked[i].layout));
    predicted.push_back(ranked[i].step_s());
    measured.push_back(m.step_s);
    out += fmt::format("{:>4}  {:<46} {:>10} {:>10} {:>6.1f}%  {:>10} {:>10} {:>9}\n", i + 1,
                       ranked[i].layout.str(), ms(ranked[i].step_s()), ms(m.step_s),
                       100.0 * (ranked[i].step_s() - m.step_s) / m.step_s,
                       mib(stage0[0].total() + ranked[i].activations), mib(m.state + m.activations),
                       mib(m.rss));
  }
  fs::remove_all(folder);
  const size_t fastest = std::min_element(measured.begin(), measured.end()) - measured.begin();
  out += fmt::format(
      "chosen (rank 1) measured {} ms; fastest measured is rank {} at {} ms ({:+.1f}%); "
      "rank correlation of predicted and measured step times over the {}: {:.2f}\n",
      ms(measured[0]), fastest + 1, ms(measured[fastest]),
      100.0 * (measured[0] - measured[fastest]) / measured[fastest], k,
      rank_correlation(predicted, measured));
  print(out);
}

void run_auto(const AutoOptions& o, const std::vector<std::string>& extra) {
  const JobConfig base = JobConfig::load(o.config, collect_overrides(extra));
  std::error_code ec;
  VS_USER_CHECK(o.output.empty() || !fs::is_directory(o.output, ec),
                "plan auto -o {}: a folder; name the config file to write", o.output);
  if (!o.output.empty()) {
    refuse_writing_over_inputs(o.output, {o.config}, "plan auto");
    refuse_replacing_foreign(
        o.output, o.overwrite, written_by_plan_auto, "plan auto -o",
        fmt::format("a config plan auto wrote (its first line starts \"{}\")", kWrittenBy));
  }
  // The device the job names must be there, as plan lint, train and eval check: else every
  // layout would be proposed for a machine that cannot run one.
  parse_device(base.device, 0);
  // Calibrating starts nproc local processes: the check every such command makes, before any.
  if (o.recalibrate || !fs::exists(calibration_cache(base, o.nproc), ec))
    check_local_processes(o.nproc, fmt::format("plan auto --nproc {}", o.nproc),
                          physical_memory_bytes());
  VS_USER_CHECK(base.family().transformer_shape(base.model_spec()).has_value(),
                "plan auto: {} trains model.name = '{}'; plan auto models "
                "transformer families only",
                base.source, base.model);
  const double memory_per_rank =
      o.memory_per_rank.empty()
          ? physical_memory_bytes() / static_cast<double>(o.nproc)
          : static_cast<double>(parse_bytes(o.memory_per_rank, "--memory-per-rank"));

  const autoplan::Enumeration layouts = autoplan::enumerate_layouts(base, o.nproc);
  print(
      fmt::format("{}: {} layouts of {} ranks considered, {} valid (plan lint and schedule "
                  "checks)\n",
                  base.source, layouts.considered, o.nproc, layouts.valid.size()));
  VS_USER_CHECK(!layouts.valid.empty(),
                "plan auto: no layout of {} ranks is valid for {}; the "
                "first reason: {}",
                o.nproc, base.source, layouts.rejected.empty() ? "-" : layouts.rejected.front());
  const MachineFacts facts = calibrate(base, o.nproc, o.recalibrate);
  if (o.explain) print(autoplan::explain_model(base, facts));

  std::vector<Prediction> ranked, dropped;
  for (const Layout& l : layouts.valid) {
    Prediction p = autoplan::predict_fitting(base, l, facts, memory_per_rank - kWorkerBaseBytes);
    (p.fits ? ranked : dropped).push_back(p);
  }
  std::stable_sort(ranked.begin(), ranked.end(), [](const Prediction& a, const Prediction& b) {
    return a.step_s() < b.step_s();
  });
  print(
      fmt::format("\npredicted per step on the busiest rank; memory per rank in MiB, the "
                  "largest rank, with {} MiB per rank available ({} layouts do not fit)\n",
                  mib(memory_per_rank), dropped.size()));
  VS_USER_CHECK(!ranked.empty(),
                "plan auto: none of the {} layouts fits in {} MiB per rank; "
                "the smallest needs {} MiB",
                dropped.size(), mib(memory_per_rank),
                mib(std::min_element(dropped.begin(), dropped.end(),
                                     [](const Prediction& a, const Prediction& b) {
                                       return a.memory() < b.memory();
                                     })
                        ->memory() +
                    kWorkerBaseBytes));
  print(table(ranked, static_cast<size_t>(o.top)));
  const Prediction& best = ranked.front();
  print(
      fmt::format("\nbest: {} ({} ms per step predicted)\n", best.layout.str(), ms(best.step_s())));
  if (!o.output.empty()) {
    const JobConfig winner = autoplan::layout_config(base, best.layout);
    write_text_atomically(o.output,
                          fmt::format("{} {} on {} ranks, {} ms per step predicted\n{}", kWrittenBy,
                                      best.layout.str(), o.nproc, ms(best.step_s()), winner.text));
    print(fmt::format("wrote {}\n", o.output));
  }
  if (o.verify > 0) verify(o, base, ranked, extra);
}

}  // namespace

void add_plan_auto_command(CLI::App& plan) {
  auto o = std::make_shared<AutoOptions>();
  CLI::App* cmd = plan.add_subcommand(
      "auto",
      "Choose a layout for N ranks: enumerate pp x dp x cp x tp (ep within dp for a mixture of "
      "experts), sp, zero, micro-batches and schedules, predict each one's step time and memory "
      "from this machine's measured facts, and rank them");
  cmd->add_option("config", o->config, "Job config (TOML)")->required();
  cmd->add_option("--nproc", o->nproc, "Number of ranks to lay out")
      ->required()
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--memory-per-rank", o->memory_per_rank,
                  "Memory one rank may use, e.g. 8GiB (default: this machine's memory / nproc)");
  cmd->add_option("--top", o->top, "Rows of the ranked table to print")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd->add_option("-o,--output", o->output, "Write the winning layout's job config here");
  cmd->add_flag("--explain", o->explain, "Print the cost model's measured facts and assumptions");
  cmd->add_option("--verify", o->verify,
                  "Train the top K layouts a few steps each and compare predicted with measured")
      ->check(CLI::Range(0, 1000));
  cmd->add_option("--verify-steps", o->verify_steps, "Steps each --verify run trains")
      ->capture_default_str()
      ->check(CLI::Range(4, 100000));
  cmd->add_flag("--recalibrate", o->recalibrate,
                "Measure the machine again instead of reading the cached calibration");
  cmd->add_flag("--overwrite", o->overwrite,
                "Replace an existing -o file that plan auto did not write (a hand-written config)");
  cmd->allow_extras();
  cmd->callback([o, cmd] { run_auto(*o, cmd->remaining()); });
}

}  // namespace vescale::app
