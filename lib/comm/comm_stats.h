// Byte accounting of the collectives, by group label (mesh dim) and by kind.
//
// NOTE [Communication volume]
// Counted bytes are per rank: the bytes this rank sends to its peers under the textbook
// algorithm of each collective, so that the numbers are analytic (the same on Gloo and NCCL,
// whatever algorithm the backend picks) and add up to Megatron's volume formulas:
//   all_gather      own piece c to each peer            (n-1)·c
//   reduce_scatter  every chunk but its own (input T)    T - c_own
//   all_reduce      reduce-scatter + all-gather (ring)   2·(n-1)·S / n      (integer division)
//   all_to_all      every piece but its own (input T)    T - c_own
//   broadcast       the root sends S to each peer        root: (n-1)·S, others 0
//   send / recv     the sender counts S                  send: S, recv: 0
//                   (isend / irecv / batches too, counted when their wait() completes)
//   barrier         no payload                           0 (the call is counted)
// Size-1 groups move nothing and count nothing.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "core/enum_names.h"

namespace vescale::comm {

enum class CommKind {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kBroadcast,
  kSend,
  kRecv,
  kBarrier
};

/// "all_reduce", "all_gather", ...
const EnumNames<CommKind>& comm_kind_names();
const char* comm_kind_name(CommKind kind);

struct CommCount {
  int64_t calls = 0;
  int64_t bytes = 0;
};

/// Every counter, keyed by (label, kind).
using CommSnapshot = std::map<std::pair<std::string, CommKind>, CommCount>;

/// Seconds blocked in waits, by group label.
using WaitSnapshot = std::map<std::string, double>;

/// Thread-safe counters of one rank (collectives may run on autograd threads too).
class CommStats {
 public:
  void record(const std::string& label, CommKind kind, int64_t bytes);
  /// Adds `seconds` this rank was blocked waiting for a collective or transfer of a group
  /// labelled `label` (NOTE [Step anatomy]).
  void record_wait(const std::string& label, double seconds);
  /// A copy of the wait counters.
  WaitSnapshot wait_snapshot() const;

  /// Bytes sent over groups labelled `label` ("tp", "dp", ...), all kinds.
  int64_t bytes(const std::string& label) const;
  /// Bytes sent over groups labelled `label` by collectives of `kind`.
  int64_t bytes(const std::string& label, CommKind kind) const;
  /// All bytes sent.
  int64_t total_bytes() const;
  /// A copy of every counter.
  CommSnapshot snapshot() const;

 private:
  mutable std::mutex mutex_;
  CommSnapshot counts_;
  WaitSnapshot waits_;
};

}  // namespace vescale::comm
