// A rank's flight recorder: its last collectives and transfers, for the diagnosis of a hang.
//
// NOTE [Flight recorder]
// A job that hangs shows only victims: every rank waits in some collective until comm.timeout_s,
// and the first to time out names its own call, not the rank that never came. So every rank keeps
// a bounded ring of its last comm.flight_recorder_entries backend calls, written where comm/ posts
// each call to c10d and where it waits for it (group_impl.h): one entry per call on the wire, so
// an uneven all-gather that is an all-to-all is one entry, and the size exchange before it one
// more. An entry holds
//   - the group (label, members as world ranks) and a sequence number per group: collectives are
//     numbered #1, #2, ... in the order every member posts them, so member ranks' numbers name
//     the same call; transfers (send, recv) are numbered apart, per group, in this rank's order;
//   - the call ("all_reduce", "send", ...), the bytes this rank hands it, a transfer's peer;
//   - the step, micro-batch and site ("forward", "bucket 3", "zero gather layer 2") the training
//     loop had set when it was posted (-1 and "" when unknown);
//   - when it was posted and completed (seconds on this rank's clock), and its state: posted (in
//     flight, not waited for yet), waiting (the rank is blocked in it), done or failed.
// Recording takes an uncontended mutex three times and copies ~130 bytes: 68 ns a call here; a
// step of gpt-dp2-tp2 makes 17 calls a rank, 1.1 us of its 36 ms (0.003%; docs/benchmarks.md,
// "Flight recorder"). The sequence numbers count even with the ring off (0 entries).
//
// A dump (to_json) is the ring with each group's counters, written to
// <dump_folder>/flight/rank-N.json (flight_watch.h says when); flight_diagnosis.h reads every
// rank's and says where they diverge.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "core/enum_names.h"

namespace vescale::comm {

/// Posted (in flight, not waited for yet), waiting (the rank is blocked in its wait), done, or
/// failed (an error or the timeout).
enum class FlightState { kPosted, kWaiting, kDone, kFailed };

/// "posted", "waiting", "done", "failed".
const EnumNames<FlightState>& flight_state_names();
const char* flight_state_name(FlightState state);

struct FlightEntry {
  uint64_t id = 0;  ///< this rank's call number, from 1
  int group = -1;   ///< index into the recorder's groups
  bool transfer = false;
  uint64_t seq = 0;     ///< per group: collectives #1, #2, ...; transfers numbered apart
  const char* op = "";  ///< "all_reduce", "send", ... (a string literal)
  int64_t bytes = 0;
  int peer = -1;  ///< a transfer's peer, as a rank of the group
  int64_t step = -1;
  int micro_batch = -1;
  std::array<char, 32> site{};
  double start_s = 0;  ///< on the recorder's clock (seconds since it started)
  double end_s = 0;    ///< 0 until done or failed
  FlightState state = FlightState::kPosted;
};

/// A group the rank is a member of, as the recorder knows it.
struct FlightGroup {
  std::string label;
  std::string key;         ///< the same on every member, and unique: two groups of one label
                           ///< and members (a tied weight's pp pair) are told apart
  std::vector<int> ranks;  ///< members, as world ranks
  int rank = 0;            ///< this rank's rank in the group
  uint64_t collectives = 0;
  uint64_t transfers = 0;
};

/// What a dump says of this process's node (NOTE [Peer heartbeat]): its host name and its recent
/// round trip to the rendezvous store; "" and -1 where no beat runs.
struct NodeFacts {
  std::string node;
  double store_trip_ms = -1;
};

/// Where every dump of this process reads those facts from: set once, by the peer heartbeat.
void set_node_facts(std::function<NodeFacts()> facts);

/// Thread-safe (collectives may be posted from autograd threads).
class FlightRecorder {
 public:
  using Clock = std::chrono::steady_clock;

  /// The recorder of world rank `rank`, keeping the last `capacity` calls (0: none, sequence
  /// numbers only).
  FlightRecorder(int rank, size_t capacity);

  /// Registers a group this rank is a member of; returns its index for begin(). `key`: as
  /// FlightGroup's ("": the label and members).
  int add_group(const std::string& label, const std::vector<int>& ranks, int rank,
                const std::string& key = "");

  /// Records that this rank posts a call on group `group` now; returns its id for end() (0 when
  /// the ring is off). Calls the before-call hook first.
  uint64_t begin(int group, bool transfer, const char* op, int64_t bytes, int peer = -1);
  /// The rank starts to wait for call `id`.
  void waiting(uint64_t id);
  /// The call `id` completed (or failed) now. A no-op for 0 or a call the ring has dropped.
  void end(uint64_t id, FlightState state);

  /// The training loop's context, copied into each entry posted from now on.
  void set_step(int64_t step);
  int64_t step() const;
  void set_micro_batch(int micro_batch);
  /// Sets the site (truncated to 31 bytes; "" clears it) and returns the previous one.
  std::string set_site(const std::string& site);

  /// Test hook: runs before a call is recorded, with the group, and the sequence number the call
  /// gets (tests/e2e make a rank hang there). Set before the first call.
  using BeforeCall = std::function<void(const FlightGroup&, uint64_t seq, bool transfer)>;
  void set_before_call(BeforeCall hook);

  /// Where dumps go ("": nowhere) and whether the ring is on.
  void set_dump_file(const std::string& path);
  std::string dump_file() const;
  /// The run the dumps are of ("run_id" in them; "" until the run is known).
  void set_run_id(const std::string& run_id);
  size_t capacity() const { return capacity_; }
  int rank() const { return rank_; }

  /// The dump as JSON text: `reason`, the groups, the context and every entry in the ring,
  /// oldest first.
  std::string to_json(const std::string& reason) const;
  /// Writes to_json(reason) to the dump file (write_text_atomically: a reader never sees half a
  /// dump). False, with nothing thrown, when there is no dump file or it fails.
  bool dump(const std::string& reason) const noexcept;

  /// Entries with an id above `after`, oldest first (those still in the ring).
  std::vector<FlightEntry> entries_after(uint64_t after) const;
  /// The groups registered so far, by index.
  std::vector<FlightGroup> groups() const;
  /// The id of the last call posted (0: none).
  uint64_t last_id() const;
  /// Seconds on this recorder's clock at `t`.
  double clock_s(Clock::time_point t) const;
  /// The wall-clock time (microseconds since the epoch) of the recorder's clock 0.
  int64_t epoch_wall_us() const { return epoch_wall_us_; }

 private:
  FlightEntry* find(uint64_t id);

  const int rank_;
  const size_t capacity_;
  const Clock::time_point epoch_;
  const int64_t epoch_wall_us_;
  mutable std::mutex mutex_;
  mutable std::mutex dump_mutex_;  // one dump at a time: they share the temporary file
  std::vector<FlightGroup> groups_;
  std::vector<FlightEntry> ring_;  // slot id % capacity
  uint64_t next_id_ = 1;
  int64_t step_ = -1;
  int micro_batch_ = -1;
  std::array<char, 32> site_{};
  std::string dump_file_;
  std::string run_id_;
  BeforeCall before_call_;
};

/// Sets the recorder's site for the life of the scope, then restores the previous one.
class FlightSite {
 public:
  FlightSite(FlightRecorder& recorder, const std::string& site)
      : recorder_(recorder), previous_(recorder.set_site(site)) {}
  ~FlightSite() { recorder_.set_site(previous_); }
  FlightSite(const FlightSite&) = delete;
  FlightSite& operator=(const FlightSite&) = delete;

 private:
  FlightRecorder& recorder_;
  std::string previous_;
};

}  // namespace vescale::comm
