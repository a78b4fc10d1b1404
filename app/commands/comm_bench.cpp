// `vescale-train comm bench`: every collective over every mesh dim on real processes, checked,
// timed, and printed as a table of latency and bus bandwidth (what nccl-tests gives).
#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>
#include <set>

#include "autoplan/calibration.h"
#include "autoplan/machine_facts.h"
#include "commands/commands.h"
#include "commands/validators.h"
#include "config/memory_estimate.h"
#include "core/device.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/logging.h"
#include "core/safe_files.h"
#include "core/units.h"
#include "launch/launch_env.h"
#include "mesh/device_mesh.h"

namespace vescale::app {
namespace {

struct BenchOptions {
  int nproc = 0;
  std::string mesh;
  std::string sizes = "1K,64K,1M,16M";
  std::string ops = "all_reduce,all_gather,reduce_scatter,all_to_all,broadcast,send_recv";
  int iters = 0;  // 0: adaptive
  int warmup = 2;
  double timeout_s = 60;
  std::string backend = "auto";
  std::string device = "auto";
  std::string calibrate;   ///< write plan auto's machine facts here (NOTE [Plan auto])
  bool overwrite = false;  ///< replace a --calibrate file that is not calibration JSON
};

/// One collective under test: runs once on buffers sized for `bytes` and checks the result.
struct Collective {
  const char* name;
  /// nccl-tests bus-bandwidth factor for a group of n.
  double (*bus_factor)(int n);
  /// Runs it once over `group` with a message of `elems` float32 elements; returns whether the
  /// values are right.
  bool (*run)(const comm::Group& group, int64_t elems);
};

/// A message on the group's device.
at::Tensor filled(const comm::Group& g, int64_t elems, double value) {
  return at::full({elems}, value, at::TensorOptions(at::kFloat).device(g.device()));
}
bool all_equal(const at::Tensor& t, double value) {
  return t.numel() == 0 || t.eq(value).all().item<bool>();
}

// Message sizes follow nccl-tests: all_gather's size is its output, reduce_scatter's its input.
const Collective kCollectives[] = {
    {"all_reduce", [](int n) { return 2.0 * (n - 1) / n; },
     [](const comm::Group& g, int64_t elems) {
       at::Tensor t = filled(g, elems, g.rank() + 1);
       g.all_reduce(t);
       return all_equal(t, g.size() * (g.size() + 1) / 2.0);
     }},
    {"all_gather", [](int n) { return (n - 1) / double(n); },
     [](const comm::Group& g, int64_t elems) {
       const int64_t per_rank = std::max<int64_t>(1, elems / g.size());
       at::Tensor out =
           g.all_gather(filled(g, per_rank, g.rank()), 0, std::vector<int64_t>(g.size(), per_rank));
       bool ok = out.numel() == per_rank * g.size();
       for (int r = 0; ok && r < g.size(); ++r)
         ok = all_equal(out.narrow(0, r * per_rank, per_rank), r);
       return ok;
     }},
    {"reduce_scatter", [](int n) { return (n - 1) / double(n); },
     [](const comm::Group& g, int64_t elems) {
       const int64_t per_rank = std::max<int64_t>(1, elems / g.size());
       at::Tensor out = g.reduce_scatter(filled(g, per_rank * g.size(), g.rank() + 1));
       return out.numel() == per_rank && all_equal(out, g.size() * (g.size() + 1) / 2.0);
     }},
    {"all_to_all", [](int n) { return (n - 1) / double(n); },
     [](const comm::Group& g, int64_t elems) {
       const int n = g.size();
       const int64_t per_rank = std::max<int64_t>(1, elems / n);
       std::vector<at::Tensor> inputs;
       for (int r = 0; r < n; ++r)
         inputs.push_back(filled(g, per_rank, g.rank() * n + r));
       auto outputs = g.all_to_all(inputs, std::vector<std::vector<int64_t>>(n, {per_rank}));
       bool ok = true;
       for (int r = 0; r < n; ++r)
         ok = ok && all_equal(outputs[r], r * n + g.rank());
       return ok;
     }},
    {"broadcast", [](int) { return 1.0; },
     [](const comm::Group& g, int64_t elems) {
       at::Tensor t = filled(g, elems, g.rank() == 0 ? 42 : -1);
       g.broadcast(t, 0);
       return all_equal(t, 42);
     }},
    {"send_recv", [](int) { return 1.0; },
     [](const comm::Group& g, int64_t elems) {
       const int n = g.size();
       at::Tensor in = filled(g, elems, -1);
       g.send_recv(filled(g, elems, g.rank()), (g.rank() + 1) % n, in, (g.rank() + n - 1) % n);
       return all_equal(in, (g.rank() + n - 1) % n);
     }},
};

const Collective& find_collective(const std::string& name) {
  std::vector<std::string> names;
  for (const auto& c : kCollectives) {
    if (name == c.name) return c;
    names.push_back(c.name);
  }
  throw UserError(fmt::format("comm bench: unknown collective '{}' in --ops: use {}", name,
                              fmt::join(names, ", ")));
}

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

int adaptive_iters(int64_t bytes) {
  return static_cast<int>(
      std::clamp<int64_t>((int64_t{64} << 20) / std::max<int64_t>(bytes, 1), 5, 100));
}

struct Row {
  std::string dim, op;
  int64_t bytes = 0;
  int iters = 0;
  double seconds = 0;  // per call, max over ranks
  double bus_factor = 1;
  int64_t counted_bytes = 0;  // per call, this rank (rank 0)
  bool ok = false;
  int group_size = 0;
};

void print_table(const std::vector<Row>& rows, const std::string& header) {
  std::printf("%s\n", header.c_str());
  std::printf("%-5s %-15s %9s %6s %10s %12s %12s %11s  %s\n", "dim", "collective", "size", "iters",
              "time", "algbw GB/s", "busbw GB/s", "bytes/rank", "check");
  for (const auto& r : rows) {
    const double algbw = r.bytes / r.seconds / 1e9;
    std::printf("%-5s %-15s %9s %6d %10s %12.3f %12.3f %11s  %s\n", r.dim.c_str(), r.op.c_str(),
                format_bytes(r.bytes).c_str(), r.iters, format_duration(r.seconds).c_str(), algbw,
                algbw * r.bus_factor, format_bytes(r.counted_bytes).c_str(), r.ok ? "ok" : "FAIL");
  }
  std::fflush(stdout);
}

/// plan auto's machine facts (NOTE [Plan auto]) from the rows and what every rank measures now,
/// written by rank 0.
void write_calibration(const std::string& path, const std::vector<Row>& rows,
                       const DeviceMesh& mesh, const comm::Group& world, const LaunchEnv& env) {
  std::vector<autoplan::CommSample> samples;
  for (const auto& r : rows)
    samples.push_back({r.op, r.group_size, r.bytes, r.seconds});
  const auto facts = autoplan::calibrate_machine(samples, mesh, world, env.local_world);
  if (facts) write_text_atomically(path, facts->to_json());
}

int run_bench(const BenchOptions& options, const LaunchEnv& env) {
  comm::GroupOptions group_options;
  group_options.device = parse_device(options.device, env.local_rank, env.local_world);
  bind_device(group_options.device);
  group_options.timeout = std::chrono::milliseconds(static_cast<int64_t>(options.timeout_s * 1000));
  // Ranks sharing a GPU take Gloo with CUDA tensors, which no GPU has run: not here (NOTE
  // [GPU-verified]; train takes it with training.unverified_kernels).
  const DeviceSetting setting = device_setting_names().parse(options.device);
  VS_USER_CHECK(!shares_gpus(setting, env.local_world, cuda_device_count()),
                "comm bench: {} local ranks would share {} GPU(s), over Gloo with CUDA tensors, "
                "a path no GPU has run yet: start at most {} ranks a node",
                env.local_world, cuda_device_count(), cuda_device_count());
  group_options.backend =
      comm::resolve_backend(comm::parse_backend(options.backend), group_options.device);
  const MeshSpec spec =
      options.mesh.empty() ? MeshSpec{{env.world}, {"world"}} : MeshSpec::parse(options.mesh);
  VS_USER_CHECK(spec.numel() == env.world,
                "comm bench: --mesh {} has {} ranks but {} processes are running: set --nproc {}",
                spec.str(), spec.numel(), env.world, spec.numel());
  const std::vector<int64_t> sizes = parse_byte_list(options.sizes, "--sizes");
  std::vector<const Collective*> ops;
  for (const auto& name : split_commas(options.ops))
    ops.push_back(&find_collective(name));

  comm::Group world = connect_world(env, group_options);
  DeviceMesh mesh(world, spec);
  log_rank0("comm bench on {}", mesh.str());

  std::vector<Row> rows;
  std::vector<std::string> skipped;
  bool all_ok = true;
  // Calibrating measures the whole world too: plan auto needs every group size.
  std::vector<std::pair<std::string, const comm::Group*>> groups;
  for (int d = 0; d < mesh.ndim(); ++d)
    groups.emplace_back(mesh.dim_names()[d], &mesh.group(d));
  if (!options.calibrate.empty() && mesh.ndim() > 1) groups.emplace_back("world", &world);
  for (const auto& [dim_name, group_ptr] : groups) {
    const comm::Group& group = *group_ptr;
    if (group.size() == 1) {
      skipped.push_back(dim_name);
      continue;
    }
    for (const Collective* op : ops) {
      for (int64_t bytes : sizes) {
        const int64_t elems = std::max<int64_t>(1, bytes / 4);
        Row row{dim_name, op->name, elems * 4};
        row.iters = options.iters > 0 ? options.iters : adaptive_iters(row.bytes);
        row.bus_factor = op->bus_factor(group.size());
        row.ok = op->run(group, elems);  // checked once, untimed
        for (int i = 0; i < options.warmup; ++i)
          op->run(group, elems);
        world.barrier();
        const int64_t bytes_before = group.stats().bytes(group.label());
        const auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < row.iters; ++i)
          op->run(group, elems);
        const double elapsed =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        row.counted_bytes = (group.stats().bytes(group.label()) - bytes_before) / row.iters;
        row.group_size = group.size();
        // The table shows the slowest rank; agreement on `ok` needs every rank's check.
        at::Tensor summary =
            at::tensor({elapsed / row.iters, row.ok ? 0.0 : 1.0}, at::kDouble).to(world.device());
        world.all_reduce(summary, comm::ReduceOp::kMax);
        row.seconds = summary[0].item<double>();
        row.ok = summary[1].item<double>() == 0.0;
        all_ok = all_ok && row.ok;
        rows.push_back(row);
      }
    }
  }
  if (!options.calibrate.empty()) write_calibration(options.calibrate, rows, mesh, world, env);
  if (env.rank == 0) {
    std::string header = fmt::format(
        "comm bench: mesh {} ({} processes, {}, {}), float32; time per call, max over ranks; "
        "bytes/rank as counted by comm/ (rank 0)",
        spec.str(), env.world, comm::backend_name(world.backend()), world.device().str());
    if (!skipped.empty())
      header += fmt::format("\nsize-1 dims are free and skipped: {}", fmt::join(skipped, ", "));
    if (rows.empty())
      header += "\nnothing to measure: every mesh dim has size 1 (use --nproc 2 or more)";
    print_table(rows, header);
  }
  world.barrier();
  VS_CHECK(all_ok, "[comm] comm bench: a collective returned wrong values (see the check column)");
  return 0;
}

/// Local ranks each hold a message's input, its output and the backend's staging of them, about
/// three times the largest of --sizes, in this machine's memory on the CPU: checked, with the
/// processes' own floor (check_local_processes), before any process starts. A size the kernel
/// overcommits would otherwise call the OOM killer, and one it refuses died with a LibTorch trace.
void check_bench_fits(const BenchOptions& options, int nproc, const std::string& wanted_by,
                      const std::vector<int64_t>& sizes) {
  const double memory = physical_memory_bytes();
  check_local_processes(nproc, wanted_by, memory);
  if (memory <= 0 || sizes.empty() || !parse_device(options.device, 0).is_cpu()) return;
  const double largest = static_cast<double>(*std::max_element(sizes.begin(), sizes.end()));
  const double need = static_cast<double>(nproc) * (kWorkerBaseBytes + 3.0 * largest);
  VS_USER_CHECK(need <= memory,
                "comm bench --sizes {}: {} ranks each holding about {} (the largest message's "
                "input, output and staging: 3 x {}, plus {} a process) need {}, and this machine "
                "has {} of memory; give smaller --sizes or fewer ranks",
                options.sizes, nproc, format_bytes(kWorkerBaseBytes + 3.0 * largest),
                format_bytes(largest), format_bytes(kWorkerBaseBytes), format_bytes(need),
                format_bytes(memory));
}

}  // namespace

void add_comm_command(CLI::App& app, const Invocation& invocation) {
  CLI::App* comm = app.add_subcommand("comm", "Communication checks over the device mesh");
  comm->require_subcommand(1);
  auto options = std::make_shared<BenchOptions>();
  CLI::App* bench = comm->add_subcommand(
      "bench",
      "Run every collective over every mesh dim on real processes, check the results, and print "
      "latency and bus bandwidth per collective and size");
  bench
      ->add_option("--nproc", options->nproc,
                   "Number of processes (default: the mesh size, or 2 without --mesh)")
      ->check(whole_in(1, 4096));
  bench->add_option("--mesh", options->mesh,
                    "Mesh as name=size,... outer to inner, e.g. pp=1,dp=2,tp=2 (default: one dim "
                    "'world' of --nproc ranks)");
  bench->add_option("--sizes", options->sizes, "Message sizes, e.g. 1K,1M,16M")
      ->capture_default_str();
  bench->add_option("--ops", options->ops, "Collectives to run")->capture_default_str();
  bench
      ->add_option("--iters", options->iters,
                   "Timed calls per row (default: adaptive, 5 to 100, ~64MiB per row)")
      ->check(whole_in(1, 1000000));
  bench->add_option("--warmup", options->warmup, "Untimed calls before timing")
      ->capture_default_str()
      ->check(whole_in(0, 1000000));
  bench->add_option("--timeout", options->timeout_s, "Seconds any collective may take")
      ->capture_default_str()
      ->check(finite_in(0.001, 86400));
  bench->add_option("--backend", options->backend, "auto (nccl on CUDA, gloo on cpu), gloo or nccl")
      ->capture_default_str();
  bench
      ->add_option("--device", options->device,
                   "auto (cuda:LOCAL_RANK when a GPU is visible, else cpu), cpu or cuda")
      ->capture_default_str();
  bench->add_option("--calibrate", options->calibrate,
                    "Also measure each rank's compute while all run, fit latency and bandwidth "
                    "per collective and group size, and write them as JSON to this file (what "
                    "plan auto calibrates with)");
  bench->add_flag("--overwrite", options->overwrite,
                  "Replace an existing --calibrate file that is not a calibration's JSON");
  bench->callback([options, &invocation] {
    // What would fail only on rank 0 after the whole bench ran, or in every worker at its
    // start, fails here, before any process: the sizes, the collectives, the mesh, the device.
    const std::vector<int64_t> sizes = parse_byte_list(options->sizes, "--sizes");
    for (const std::string& name : split_commas(options->ops))
      find_collective(name);
    if (!options->mesh.empty()) MeshSpec::parse(options->mesh);
    const std::optional<DeviceSetting> device = device_setting_names().find(options->device);
    VS_USER_CHECK(device.has_value(), "comm bench --device {}: use auto, cpu or cuda",
                  options->device);
    VS_USER_CHECK(*device != DeviceSetting::kCuda || cuda_device_count() > 0,
                  "comm bench --device cuda: no GPU is visible to this process (a CPU-only "
                  "LibTorch, or no CUDA device); use --device cpu or auto");
    if (!options->calibrate.empty()) {
      std::error_code ec;
      VS_USER_CHECK(!std::filesystem::is_directory(options->calibrate, ec),
                    "comm bench --calibrate {}: a folder; name the file to write",
                    options->calibrate);
      refuse_replacing_foreign(
          options->calibrate, options->overwrite,
          [](const std::filesystem::path& path) {
            autoplan::MachineFacts::from_json(read_input_file(path.string(), "calibration"),
                                              path.string());
            return true;
          },
          "comm bench --calibrate", "machine facts a calibration wrote (JSON plan auto reads)");
      std::set<int64_t> distinct(sizes.begin(), sizes.end());
      VS_USER_CHECK(distinct.size() >= 2,
                    "comm bench --calibrate fits a latency and a bandwidth per collective: give "
                    "--sizes two sizes or more (e.g. 16K,256K,2M), not {}",
                    options->sizes);
    }
    int nproc = options->nproc;
    std::string wanted_by = fmt::format("--nproc {}", nproc);
    if (nproc == 0) {
      nproc = options->mesh.empty() ? 2 : static_cast<int>(MeshSpec::parse(options->mesh).numel());
      wanted_by = options->mesh.empty() ? std::string("comm bench (2 ranks by default)")
                                        : fmt::format("--mesh {}", options->mesh);
    }
    if (!detect_launch_env()) check_bench_fits(*options, nproc, wanted_by, sizes);
    const int code = run_on_ranks(nproc, wanted_by, invocation,
                                  [&](const LaunchEnv& env) { return run_bench(*options, env); });
    if (code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace vescale::app
