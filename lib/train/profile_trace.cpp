#include "train/profile_trace.h"

#include <ATen/ATen.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <regex>
#include <set>

#include "core/error.h"
#include "core/logging.h"
#include "core/safe_files.h"

namespace vescale {
namespace {

using nlohmann::json;

constexpr int kPhasesThread = 1;
constexpr int kCommThread = 2;
constexpr int kFirstStreamThread = 100;  ///< GPU stream s shows as thread 100 + s

/// A complete event ("X") on this rank's clock.
json span_event(const std::string& name, const char* category, double start_s, double end_s,
                int64_t epoch_us, int rank, int thread, json args) {
  return {{"name", name},
          {"cat", category},
          {"ph", "X"},
          {"ts", static_cast<double>(epoch_us) + start_s * 1e6},
          {"dur", std::max(0.0, end_s - start_s) * 1e6},
          {"pid", rank},
          {"tid", thread},
          {"args", std::move(args)}};
}

json name_event(const char* what, int rank, int thread, const std::string& name) {
  json e = {{"name", what}, {"ph", "M"}, {"pid", rank}, {"args", {{"name", name}}}};
  if (thread >= 0) e["tid"] = thread;
  return e;
}

/// Every rank's text, gathered on every rank (rank order). *Collective* over `world`.
std::vector<std::string> gather_texts(const comm::Group& world, const std::string& text) {
  if (world.size() == 1) return {text};
  // The group's tensors live on its device (a GPU, under NCCL or Gloo).
  at::Tensor bytes = at::empty({static_cast<int64_t>(text.size())}, at::kByte);
  std::memcpy(bytes.data_ptr(), text.data(), text.size());
  const at::Tensor mine = bytes.to(world.device());
  const at::Tensor size = at::full({1}, mine.numel(), at::dtype(at::kLong).device(world.device()));
  const at::Tensor sizes =
      world.all_gather(size, 0, std::vector<int64_t>(world.size(), 1)).cpu().contiguous();
  std::vector<int64_t> counts(sizes.data_ptr<int64_t>(), sizes.data_ptr<int64_t>() + world.size());
  const at::Tensor all = world.all_gather(mine, 0, counts).cpu().contiguous();
  std::vector<std::string> out;
  int64_t offset = 0;
  for (int64_t n : counts) {
    out.emplace_back(reinterpret_cast<const char*>(all.data_ptr<uint8_t>()) + offset,
                     static_cast<size_t>(n));
    offset += n;
  }
  return out;
}

}  // namespace

StepRange StepRange::parse(const std::string& text, const std::string& option) {
  static const std::regex form(R"((\d+)(?:-(\d+))?)");
  std::smatch m;
  VS_USER_CHECK(std::regex_match(text, m, form),
                "{} {}: expected a step range FIRST-LAST (e.g. 2-3) or one step", option, text);
  // Steps of up to 18 digits: never past int64, so stoll cannot throw.
  auto step = [&](const std::string& digits) {
    VS_USER_CHECK(digits.size() <= 18, "{} {}: step {} is too large (at most 18 digits)", option,
                  text, digits);
    return static_cast<int64_t>(std::stoll(digits));
  };
  StepRange range;
  range.first = step(m[1]);
  range.last = m[2].matched ? step(m[2]) : range.first;
  VS_USER_CHECK(range.first >= 1 && range.last >= range.first,
                "{} {}: steps count from 1, and LAST must not be before FIRST", option, text);
  return range;
}

Profiler::Profiler(StepRange range, StepTrace& trace, const comm::Group& world, std::string path,
                   Device device)
    : range_(range), trace_(trace), world_(world), path_(std::move(path)), device_(device) {}

void Profiler::start_step(int64_t step) {
  if (!range_.contains(step)) return;
  trace_.set_recording(true);
  calls_before_ = trace_.flight().last_id();
  step_start_s_ = trace_.flight().clock_s(comm::FlightRecorder::Clock::now());
  // From the first profiled step this run reaches (a resumed run may start inside the range).
  if (!gpu_tried_ && device_.is_cuda() && GpuActivity::built()) {
    gpu_tried_ = true;
    try {
      gpu_.start([&flight = trace_.flight()] {
        return flight.clock_s(comm::FlightRecorder::Clock::now());
      });
    } catch (const std::exception& e) {  // the trace of the host side is still worth having
      spdlog::warn("[profile] the GPU's kernels are not recorded: {}", e.what());
    }
  }
}

void Profiler::stop_gpu_activity() {
  if (!gpu_.recording()) return;
  std::vector<GpuActivityEvent> events = gpu_.stop();
  if (events.empty()) {
    spdlog::warn(
        "[profile] rank {}: the profiler recorded no GPU activity (a LibTorch without "
        "Kineto's CUDA support?); the trace has the host side only",
        world_.rank());
  }
  gpu_events_.insert(gpu_events_.end(), std::make_move_iterator(events.begin()),
                     std::make_move_iterator(events.end()));
}

void Profiler::end_step(int64_t step) {
  if (!range_.contains(step)) return;
  comm::FlightRecorder& flight = trace_.flight();
  steps_.push_back({fmt::format("step {}", step), step_start_s_,
                    flight.clock_s(comm::FlightRecorder::Clock::now()), step, -1, -1});
  trace_.set_recording(false);
  for (PhaseSpan& span : trace_.take())
    phases_.push_back(std::move(span));
  const std::vector<comm::FlightEntry> calls = flight.entries_after(calls_before_);
  const uint64_t last = flight.last_id();
  dropped_ += static_cast<int64_t>(last - calls_before_) - static_cast<int64_t>(calls.size());
  calls_.insert(calls_.end(), calls.begin(), calls.end());
  if (step == range_.last) {
    stop_gpu_activity();
    write();
  }
}

void Profiler::finish() {
  stop_gpu_activity();
  if (!steps_.empty() && !written_) write();
}

void Profiler::write() {
  written_ = true;
  const comm::FlightRecorder& flight = trace_.flight();
  const int rank = world_.rank();
  const int64_t epoch = flight.epoch_wall_us();
  const std::vector<comm::FlightGroup> groups = flight.groups();
  json events = json::array();
  events.push_back(name_event("process_name", rank, -1, fmt::format("rank {}", rank)));
  events.push_back(name_event("process_sort_index", rank, -1, ""));
  events.back()["args"] = {{"sort_index", rank}};
  events.push_back(name_event("thread_name", rank, kPhasesThread, "phases"));
  events.push_back(name_event("thread_name", rank, kCommThread, "comm"));
  for (const PhaseSpan& s : steps_)
    events.push_back(span_event(s.name, "step", s.start_s, s.end_s, epoch, rank, kPhasesThread,
                                {{"step", s.step}}));
  for (const PhaseSpan& s : phases_) {
    json args = {{"step", s.step}};
    if (s.micro_batch >= 0) args["micro_batch"] = s.micro_batch;
    if (s.stage >= 0) args["stage"] = s.stage;
    events.push_back(
        span_event(s.name, "phase", s.start_s, s.end_s, epoch, rank, kPhasesThread, args));
  }
  for (const comm::FlightEntry& e : calls_) {
    const comm::FlightGroup& g = groups.at(static_cast<size_t>(e.group));
    json args = {{"group", fmt::format("{} [{}]", g.label, fmt::join(g.ranks, ", "))},
                 {"seq", e.seq},
                 {"bytes", e.bytes},
                 {"step", e.step},
                 {"site", e.site.data()},
                 {"state", comm::flight_state_name(e.state)}};
    if (e.micro_batch >= 0) args["micro_batch"] = e.micro_batch;
    if (e.transfer) args["peer"] = g.ranks.at(static_cast<size_t>(e.peer));
    const double end = e.state == comm::FlightState::kPosted ? e.start_s : e.end_s;
    events.push_back(span_event(fmt::format("{} {} #{}", e.op, g.label, e.seq), "comm", e.start_s,
                                end, epoch, rank, kCommThread, args));
  }
  std::set<int64_t> streams;
  for (const GpuActivityEvent& e : gpu_events_) {
    const int thread = kFirstStreamThread + static_cast<int>(e.stream);
    if (streams.insert(e.stream).second)
      events.push_back(name_event("thread_name", rank, thread,
                                  fmt::format("{} stream {}", device_.str(), e.stream)));
    events.push_back(span_event(e.name, e.category.c_str(), e.start_s, e.end_s, epoch, rank, thread,
                                json::object()));
  }
  std::string text = events.dump();
  text = text.substr(1, text.size() - 2);  // the events without the brackets, to concatenate
  const std::vector<std::string> all = gather_texts(world_, text);
  const int64_t dropped = dropped_;
  if (rank != 0) return;
  std::vector<std::string> parts;
  for (const std::string& part : all)
    if (!part.empty()) parts.push_back(part);
  const std::string trace = fmt::format(
      "{{\"displayTimeUnit\": \"ms\", \"otherData\": {{\"steps\": \"{}-{}\", "
      "\"dropped_calls_rank0\": {}}},\n\"traceEvents\": [\n{}\n]}}\n",
      range_.first, range_.last, dropped, fmt::join(parts, ",\n"));
  write_text_atomically(path_, trace);
  log_rank0("[profile] steps {}-{} of {} ranks: {} (chrome://tracing or ui.perfetto.dev)",
            range_.first, range_.last, world_.size(), path_);
}

}  // namespace vescale
