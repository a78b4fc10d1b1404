#include "comm/flight_recorder.h"

#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>

#include "core/safe_files.h"

namespace vescale::comm {
namespace {

int64_t wall_us_now() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void copy_site(std::array<char, 32>& to, const std::string& site) {
  const size_t n = std::min(site.size(), to.size() - 1);
  std::memcpy(to.data(), site.data(), n);
  to[n] = '\0';
}

nlohmann::json entry_json(const FlightEntry& e) {
  nlohmann::json j = {{"id", e.id},
                      {"group", e.group},
                      {"transfer", e.transfer},
                      {"seq", e.seq},
                      {"op", e.op},
                      {"bytes", e.bytes},
                      {"step", e.step},
                      {"micro_batch", e.micro_batch},
                      {"site", e.site.data()},
                      {"start_s", e.start_s},
                      {"state", flight_state_name(e.state)}};
  if (e.transfer) j["peer"] = e.peer;
  if (e.state == FlightState::kDone || e.state == FlightState::kFailed) j["end_s"] = e.end_s;
  return j;
}

std::atomic<const std::function<NodeFacts()>*> g_node_facts{nullptr};
}  // namespace

const EnumNames<FlightState>& flight_state_names() {
  static const EnumNames<FlightState> names("[flight] call state",
                                            {{FlightState::kPosted, "posted"},
                                             {FlightState::kWaiting, "waiting"},
                                             {FlightState::kDone, "done"},
                                             {FlightState::kFailed, "failed"}});
  return names;
}

const char* flight_state_name(FlightState state) {
  return flight_state_names().name(state);
}

FlightRecorder::FlightRecorder(int rank, size_t capacity)
    : rank_(rank),
      capacity_(capacity),
      epoch_(Clock::now()),
      epoch_wall_us_(wall_us_now()),
      ring_(capacity) {}

int FlightRecorder::add_group(const std::string& label, const std::vector<int>& ranks, int rank,
                              const std::string& key) {
  std::string id = key;
  if (id.empty()) {
    id = label;
    for (int r : ranks)
      id += "/" + std::to_string(r);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  groups_.push_back({label, id, ranks, rank, 0, 0});
  return static_cast<int>(groups_.size()) - 1;
}

uint64_t FlightRecorder::begin(int group, bool transfer, const char* op, int64_t bytes, int peer) {
  if (before_call_) {
    FlightGroup g;
    uint64_t seq = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      g = groups_.at(static_cast<size_t>(group));
      seq = (transfer ? g.transfers : g.collectives) + 1;
    }
    before_call_(g, seq, transfer);
  }
  const double now = clock_s(Clock::now());
  std::lock_guard<std::mutex> lock(mutex_);
  FlightGroup& g = groups_[static_cast<size_t>(group)];
  const uint64_t seq = transfer ? ++g.transfers : ++g.collectives;
  if (capacity_ == 0) return 0;
  const uint64_t id = next_id_++;
  FlightEntry& e = ring_[id % capacity_];
  e.id = id;
  e.group = group;
  e.transfer = transfer;
  e.seq = seq;
  e.op = op;
  e.bytes = bytes;
  e.peer = peer;
  e.step = step_;
  e.micro_batch = micro_batch_;
  e.site = site_;
  e.start_s = now;
  e.end_s = 0;
  e.state = FlightState::kPosted;
  return id;
}

FlightEntry* FlightRecorder::find(uint64_t id) {
  if (id == 0 || capacity_ == 0) return nullptr;
  FlightEntry& e = ring_[id % capacity_];
  return e.id == id ? &e : nullptr;
}

void FlightRecorder::waiting(uint64_t id) {
  if (id == 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (FlightEntry* e = find(id)) e->state = FlightState::kWaiting;
}

void FlightRecorder::end(uint64_t id, FlightState state) {
  if (id == 0) return;
  const double now = clock_s(Clock::now());
  std::lock_guard<std::mutex> lock(mutex_);
  if (FlightEntry* e = find(id)) {
    e->end_s = now;
    e->state = state;
  }
}

void FlightRecorder::set_step(int64_t step) {
  std::lock_guard<std::mutex> lock(mutex_);
  step_ = step;
}

int64_t FlightRecorder::step() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return step_;
}

void FlightRecorder::set_micro_batch(int micro_batch) {
  std::lock_guard<std::mutex> lock(mutex_);
  micro_batch_ = micro_batch;
}

std::string FlightRecorder::set_site(const std::string& site) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string previous = site_.data();
  copy_site(site_, site);
  return previous;
}

void FlightRecorder::set_before_call(BeforeCall hook) {
  std::lock_guard<std::mutex> lock(mutex_);
  before_call_ = std::move(hook);
}

void FlightRecorder::set_run_id(const std::string& run_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  run_id_ = run_id;
}

void FlightRecorder::set_dump_file(const std::string& path) {
  std::lock_guard<std::mutex> lock(mutex_);
  dump_file_ = path;
}

std::string FlightRecorder::dump_file() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return dump_file_;
}

double FlightRecorder::clock_s(Clock::time_point t) const {
  return std::chrono::duration<double>(t - epoch_).count();
}

std::vector<FlightEntry> FlightRecorder::entries_after(uint64_t after) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<FlightEntry> out;
  if (capacity_ == 0) return out;
  const uint64_t first =
      std::max<uint64_t>(after + 1, next_id_ > capacity_ ? next_id_ - capacity_ : 1);
  for (uint64_t id = first; id < next_id_; ++id)
    out.push_back(ring_[id % capacity_]);
  return out;
}

std::vector<FlightGroup> FlightRecorder::groups() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return groups_;
}

uint64_t FlightRecorder::last_id() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return next_id_ - 1;
}

void set_node_facts(std::function<NodeFacts()> facts) {
  // Leaked: dumps may run on other threads until the process ends.
  g_node_facts.store(new std::function<NodeFacts()>(std::move(facts)));
}

std::string FlightRecorder::to_json(const std::string& reason) const {
  const auto* source = g_node_facts.load();
  const NodeFacts facts = source != nullptr ? (*source)() : NodeFacts{};
  const double now = clock_s(Clock::now());
  std::vector<FlightEntry> entries = entries_after(0);
  std::lock_guard<std::mutex> lock(mutex_);
  nlohmann::json groups = nlohmann::json::array();
  for (const FlightGroup& g : groups_) {
    groups.push_back({{"label", g.label},
                      {"key", g.key},
                      {"ranks", g.ranks},
                      {"rank", g.rank},
                      {"collectives", g.collectives},
                      {"transfers", g.transfers}});
  }
  nlohmann::json list = nlohmann::json::array();
  for (const FlightEntry& e : entries)
    list.push_back(entry_json(e));
  const nlohmann::json dump = {{"format", "vescale-train flight recorder 1"},
                               {"rank", rank_},
                               {"run_id", run_id_},
                               {"pid", static_cast<int64_t>(::getpid())},
                               {"node", facts.node},
                               {"store_trip_ms", facts.store_trip_ms},
                               {"reason", reason},
                               {"now_s", now},
                               {"epoch_wall_us", epoch_wall_us_},
                               {"step", step_},
                               {"micro_batch", micro_batch_},
                               {"site", site_.data()},
                               {"capacity", capacity_},
                               {"calls", next_id_ - 1},
                               {"groups", groups},
                               {"entries", list}};
  return dump.dump(1) + "\n";
}

bool FlightRecorder::dump(const std::string& reason) const noexcept {
  try {
    const std::string path = dump_file();
    if (path.empty()) return false;
    const std::string text = to_json(reason);
    std::lock_guard<std::mutex> lock(dump_mutex_);
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    write_text_atomically(path, text);
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace vescale::comm
