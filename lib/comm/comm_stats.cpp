#include "comm/comm_stats.h"

namespace vescale::comm {

const char* comm_kind_name(CommKind kind) {
  switch (kind) {
    case CommKind::kAllReduce:
      return "all_reduce";
    case CommKind::kAllGather:
      return "all_gather";
    case CommKind::kReduceScatter:
      return "reduce_scatter";
    case CommKind::kAllToAll:
      return "all_to_all";
    case CommKind::kBroadcast:
      return "broadcast";
    case CommKind::kSend:
      return "send";
    case CommKind::kRecv:
      return "recv";
    case CommKind::kBarrier:
      return "barrier";
  }
  return "?";
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
