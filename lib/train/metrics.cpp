#include "train/metrics.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/safe_files.h"
#include "core/units.h"
#include "core/write_fully.h"

namespace vescale {
namespace {

/// 12,345: the digits copied with a comma before each group of three (not std::string::insert,
/// in which GCC 12 at -O2 sees a false -Wrestrict once inlined here: its bug 105329).
std::string with_commas(double value) {
  const std::string digits = std::to_string(static_cast<int64_t>(value + 0.5));
  std::string out;
  out.reserve(digits.size() + digits.size() / 3);
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && digits[i - 1] != '-' && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

/// "rs" for "reduce_scatter": the console line's names of collective kinds.
std::string short_kind_name(const std::string& kind) {
  static const std::map<std::string, std::string> kShort = {{"all_reduce", "ar"},
                                                            {"all_gather", "ag"},
                                                            {"reduce_scatter", "rs"},
                                                            {"all_to_all", "a2a"},
                                                            {"broadcast", "bc"}};
  auto it = kShort.find(kind);
  return it == kShort.end() ? kind : it->second;
}

/// " (dp: rs 600KiB, ag 600KiB)", or "" when dp sent nothing.
std::string dp_comm_by_kind(const StepMetrics& m) {
  auto dp = m.comm_bytes_by_kind.find("dp");
  if (dp == m.comm_bytes_by_kind.end() || dp->second.empty()) return "";
  std::vector<std::string> kinds;
  for (const auto& [kind, bytes] : dp->second)
    kinds.push_back(
        fmt::format("{} {}", short_kind_name(kind), format_bytes(static_cast<double>(bytes))));
  return fmt::format(" (dp: {})", fmt::join(kinds, ", "));
}

}  // namespace

void set_comm_bytes(StepMetrics& m, const comm::CommSnapshot& before,
                    const comm::CommSnapshot& after) {
  m.comm_bytes.clear();
  m.comm_bytes_by_kind.clear();
  for (const auto& [key, count] : after) {
    const auto& [label, kind] = key;
    if (label == "world") continue;
    auto earlier = before.find(key);
    const int64_t bytes = count.bytes - (earlier == before.end() ? 0 : earlier->second.bytes);
    m.comm_bytes[label] += bytes;
    if (bytes != 0) m.comm_bytes_by_kind[label][comm::comm_kind_name(kind)] = bytes;
  }
}

void set_comm_waits(StepMetrics& m, const comm::WaitSnapshot& before,
                    const comm::WaitSnapshot& after) {
  m.comm_wait_s.clear();
  for (const auto& [label, seconds] : after) {
    if (label == "world") continue;
    const auto earlier = before.find(label);
    m.comm_wait_s[label] = seconds - (earlier == before.end() ? 0.0 : earlier->second);
  }
}

std::vector<std::pair<std::string, double>> step_phases(const StepMetrics& m) {
  const StepAnatomy& t = m.time;
  const double sum = t.forward_s + t.backward_s + t.bubble_s + t.grad_sync_s + t.optimizer_s;
  return {{"forward", t.forward_s},     {"backward", t.backward_s},
          {"bubble", t.bubble_s},       {"grad_sync", t.grad_sync_s},
          {"optimizer", t.optimizer_s}, {"other", std::max(0.0, m.step_time_s - sum)}};
}

namespace {

/// " | fwd 12ms bwd 20ms sync 1ms opt 3ms other 2ms (blocked: tp 4ms, dp 1ms)".
std::string anatomy_text(const StepMetrics& m) {
  static const std::map<std::string, std::string> kShort = {
      {"forward", "fwd"},    {"backward", "bwd"},  {"bubble", "bubble"},
      {"grad_sync", "sync"}, {"optimizer", "opt"}, {"other", "other"}};
  std::vector<std::string> parts;
  for (const auto& [name, seconds] : step_phases(m)) {
    if (name == "bubble" && seconds == 0) continue;
    parts.push_back(fmt::format("{} {:.0f}ms", kShort.at(name), seconds * 1e3));
  }
  std::vector<std::string> waits;
  for (const auto& [label, seconds] : m.comm_wait_s)
    waits.push_back(fmt::format("{} {:.0f}ms", label, seconds * 1e3));
  return fmt::format(" | {}{}", fmt::join(parts, " "),
                     waits.empty() ? "" : fmt::format(" (blocked: {})", fmt::join(waits, ", ")));
}

/// ", gpu 9.1GiB peak (12.0GiB reserved)" on a GPU; nothing on the CPU.
std::string gpu_memory_text(const StepMetrics& m) {
  if (!m.gpu_mem) return "";
  return fmt::format(", gpu {} peak ({} reserved)",
                     format_bytes(static_cast<double>(m.gpu_mem->allocated_peak)),
                     format_bytes(static_cast<double>(m.gpu_mem->reserved_peak)));
}

}  // namespace

std::string format_metrics_line(const StepMetrics& m) {
  int64_t comm = 0;
  for (const auto& entry : m.comm_bytes)
    comm += entry.second;
  std::string line = fmt::format("step {}/{} | loss {:.4f}", m.step, m.total_steps, m.loss);
  if (m.val_loss) line += fmt::format(" | val_loss {:.4f}", *m.val_loss);
  if (m.aux_loss) line += fmt::format(" | aux_loss {:.4f}", *m.aux_loss);
  if (m.expert_load_max_over_mean)
    line += fmt::format(" | expert load max/mean {:.2f}", *m.expert_load_max_over_mean);
  std::vector<std::string> state;
  for (const auto& [kind, bytes] : m.state_bytes)
    state.push_back(fmt::format("{} {}", kind, format_bytes(static_cast<double>(bytes))));
  line += fmt::format(" | lr {:.2g} | grad_norm {:.3g} | tok/s {} | mfu {:.2f}% | mem host {}{}{}",
                      m.lr, m.grad_norm, with_commas(m.tokens_per_s), 100.0 * m.mfu,
                      format_bytes(static_cast<double>(m.mem_bytes)), gpu_memory_text(m),
                      state.empty() ? "" : fmt::format(" ({})", fmt::join(state, ", ")));
  line +=
      fmt::format(" | comm {}/step{}", format_bytes(static_cast<double>(comm)), dp_comm_by_kind(m));
  line += anatomy_text(m);
  if (m.checkpoint_stall_s > 0)
    line += fmt::format(" | ckpt stall {}", format_duration(m.checkpoint_stall_s));
  // The last step's line ends the run: "done", not an ETA of nothing.
  const bool last = m.total_steps > 0 && m.step >= m.total_steps;
  line += last ? " | done" : fmt::format(" | eta {}", format_duration(m.eta_s));
  return line;
}

std::string metrics_json(const StepMetrics& m, const std::string& run_id) {
  nlohmann::ordered_json j;
  if (!run_id.empty()) j["run_id"] = run_id;
  j["step"] = m.step;
  j["loss"] = m.loss;
  if (m.val_loss) j["val_loss"] = *m.val_loss;
  if (m.aux_loss) j["aux_loss"] = *m.aux_loss;
  if (m.expert_load_max_over_mean) j["expert_load_max_over_mean"] = *m.expert_load_max_over_mean;
  j["lr"] = m.lr;
  j["grad_norm"] = m.grad_norm;
  j["tokens_per_s"] = m.tokens_per_s;
  j["mfu"] = m.mfu;
  j["mem_bytes"] = m.mem_bytes;
  if (m.gpu_mem) {
    j["gpu_mem"] = {{"allocated_peak", m.gpu_mem->allocated_peak},
                    {"reserved_peak", m.gpu_mem->reserved_peak}};
  }
  if (!m.state_bytes.empty()) {
    nlohmann::ordered_json state;
    for (const auto& [kind, bytes] : m.state_bytes)
      state[kind] = bytes;
    j["state_bytes"] = state;
  }
  j["comm_bytes"] = m.comm_bytes;
  j["comm_bytes_by_kind"] = m.comm_bytes_by_kind;
  j["step_time_s"] = m.step_time_s;
  nlohmann::ordered_json time;
  for (const auto& [name, seconds] : step_phases(m))
    time[name] = seconds;
  j["time_s"] = time;
  j["comm_wait_s"] = m.comm_wait_s;
  j["checkpoint_stall_s"] = m.checkpoint_stall_s;
  return j.dump();
}

MetricsWriter::MetricsWriter(const std::string& path, const std::string& run_id)
    : path_(path), run_id_(run_id) {
  if (path.empty()) return;
  // Checked now, created at the first line: a job that fails before its first step leaves no
  // metrics.jsonl behind.
  std::filesystem::path existing = std::filesystem::absolute(path).parent_path();
  while (!existing.empty() && !std::filesystem::exists(existing) &&
         existing != existing.parent_path())
    existing = existing.parent_path();
  VS_USER_CHECK(::access(existing.c_str(), W_OK) == 0,
                "metrics: cannot write {}: {} is not writable", path, existing.string());
}

MetricsWriter::~MetricsWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void MetricsWriter::write(const StepMetrics& m) {
  if (path_.empty() || failed_) return;
  if (fd_ < 0) {
    std::filesystem::create_directories(std::filesystem::path(path_).parent_path());
    fd_ = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  }
  if (fd_ < 0 || !write_fully(fd_, metrics_json(m, run_id_) + "\n")) {
    // Training goes on (its checkpoints say for themselves whether they could be written), but
    // not silently.
    failed_ = true;
    spdlog::error("metrics: writing {} failed ({}); no more metrics are recorded for this run",
                  path_, std::strerror(errno));
  }
}

int64_t drop_metrics_after(const std::filesystem::path& path, int64_t step) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return 0;
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> lines;
  for (size_t start = 0; start < text.size();) {
    const size_t end = std::min(text.find('\n', start), text.size());
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  std::string kept;
  int64_t after = 0, torn = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    const nlohmann::json j = nlohmann::json::parse(lines[i], nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() && i + 1 == lines.size()) {
      ++torn;  // the crash cut its last write short
    } else if (j.is_object() && j.contains("step") && j["step"].is_number_integer() &&
               j["step"].get<int64_t>() > step) {
      ++after;
    } else {
      kept += lines[i] + "\n";
    }
  }
  // Rewritten also when only the last line's newline was missing: the next line must not be
  // glued to it.
  if (kept == text) return 0;
  write_text_atomically(path, kept);
  const int64_t dropped = after + torn;
  if (dropped > 0) {
    spdlog::info(
        "[metrics] {}: dropped {} line{} after step {} (the timeline lost since the "
        "checkpoint{}); the resumed run writes them again",
        path.string(), dropped, dropped == 1 ? "" : "s", step,
        torn > 0 ? ", the last one torn by the crash" : "");
  }
  return dropped;
}

int64_t resident_bytes() {
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<int64_t>(resident) * ::sysconf(_SC_PAGESIZE);
}

int64_t peak_resident_bytes() {
  struct rusage usage {};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

double measured_peak_flops() {
  return measured_matmul_flops(512, 0.2);
}

double measured_matmul_flops(int64_t n, double seconds, Device device, at::ScalarType dtype) {
  const auto options = at::TensorOptions().device(device).dtype(dtype);
  const at::Tensor a = at::randn({n, n}, options), b = at::randn({n, n}, options);
  // A GPU queues its matmuls: the clock reads after a batch of them, once an element of the last
  // one is read back (which waits for the queue). The CPU's are done when they return.
  const bool queued = device.is_cuda();
  const int64_t batch = queued ? 8 : 1;
  auto done = [queued](const at::Tensor& c) {
    if (queued) c.flatten()[0].item<double>();
  };
  done(at::matmul(a, b));  // warm up
  int64_t iters = 0;
  const auto start = std::chrono::steady_clock::now();
  double elapsed = 0;
  while (elapsed < seconds) {
    at::Tensor c;
    for (int64_t i = 0; i < batch; ++i)
      c = at::matmul(a, b);
    done(c);
    iters += batch;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return 2.0 * static_cast<double>(n * n * n) * static_cast<double>(iters) / elapsed;
}

}  // namespace vescale
