#include "comm/comm_stats.h"

namespace vescale::comm {

const EnumNames<CommKind>& comm_kind_names() {
  static const EnumNames<CommKind> names("[comm] collective",
                                         {{CommKind::kAllReduce, "all_reduce"},
                                          {CommKind::kAllGather, "all_gather"},
                                          {CommKind::kReduceScatter, "reduce_scatter"},
                                          {CommKind::kAllToAll, "all_to_all"},
                                          {CommKind::kBroadcast, "broadcast"},
                                          {CommKind::kSend, "send"},
                                          {CommKind::kRecv, "recv"},
                                          {CommKind::kBarrier, "barrier"}});
  return names;
}

const char* comm_kind_name(CommKind kind) {
  return comm_kind_names().name(kind);
}

void CommStats::record(const std::string& label, CommKind kind, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  CommCount& c = counts_[{label, kind}];
  c.calls += 1;
  c.bytes += bytes;
}

int64_t CommStats::bytes(const std::string& label) const {
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t total = 0;
  for (const auto& [key, count] : counts_) {
    if (key.first == label) total += count.bytes;
  }
  return total;
}

int64_t CommStats::bytes(const std::string& label, CommKind kind) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = counts_.find({label, kind});
  return it == counts_.end() ? 0 : it->second.bytes;
}

int64_t CommStats::total_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t total = 0;
  for (const auto& entry : counts_)
    total += entry.second.bytes;
  return total;
}

void CommStats::record_wait(const std::string& label, double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  waits_[label] += seconds;
}

WaitSnapshot CommStats::wait_snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return waits_;
}

CommSnapshot CommStats::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return counts_;
}

}  // namespace vescale::comm
