#include "comm/flight_diagnosis.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>
#include <set>

#include "comm/peer_watch.h"
#include "core/error.h"
#include "core/input_file.h"

namespace vescale::comm {
namespace fs = std::filesystem;
namespace {

using nlohmann::json;

struct Call {
  uint64_t id = 0;
  int group = -1;
  bool transfer = false;
  uint64_t seq = 0;
  std::string op;
  int64_t bytes = 0;
  int peer = -1;
  int64_t step = -1;
  int micro_batch = -1;
  std::string site;
  double start_s = 0;
  double end_s = 0;
  std::string state;
};

struct GroupState {
  std::string label;
  std::string key;
  std::string name;  ///< "tp group [2, 3]", and its key where two groups share that
  std::vector<int> ranks;
  int rank = 0;
  uint64_t collectives = 0;
};

struct Dump {
  int rank = -1;
  std::string run_id;  ///< "" in dumps written before runs had ids in them
  std::string reason;
  double now_s = 0;
  std::string node;  ///< NOTE [Peer heartbeat]: "" where no beat ran
  double store_trip_ms = -1;
  std::vector<GroupState> groups;
  std::vector<Call> calls;  // oldest first

  /// The latest call of group `g` with collective sequence number `seq`, if still in the ring.
  const Call* collective(int g, uint64_t seq) const {
    for (auto it = calls.rbegin(); it != calls.rend(); ++it)
      if (it->group == g && !it->transfer && it->seq == seq) return &*it;
    return nullptr;
  }
  int group_index(const std::string& key) const {
    for (size_t i = 0; i < groups.size(); ++i)
      if (groups[i].key == key) return static_cast<int>(i);
    return -1;
  }
};

/// A dump of 256 MiB holds over a million entries, what a ring of comm.flight_recorder_entries
/// (at most 2^20) dumps; a larger file is not one.
constexpr int64_t kMaxDumpBytes = int64_t{256} << 20;

/// The dump at `path`, which its name says is rank `file_rank`'s. Reads a regular file of at most
/// kMaxDumpBytes only (a FIFO would block, a folder does not parse), and refuses ranks that are
/// negative or not the file's.
Dump read_dump(const std::string& path, int file_rank) {
  const std::string text = read_input_file(path, "[diagnose] flight recorder dump", kMaxDumpBytes);
  Dump d;
  try {
    const json j = json::parse(text);
    VS_USER_CHECK(j.value("format", "") == "vescale-train flight recorder 1",
                  "[diagnose] {} is not a flight recorder dump (no \"format\": \"vescale-train "
                  "flight recorder 1\")",
                  path);
    d.rank = j.at("rank").get<int>();
    VS_USER_CHECK(d.rank == file_rank,
                  "[diagnose] {} says it is rank {}'s dump, but its name says rank {}", path,
                  d.rank, file_rank);
    d.run_id = j.value("run_id", "");
    d.reason = j.at("reason").get<std::string>();
    d.now_s = j.at("now_s").get<double>();
    d.node = j.value("node", "");
    d.store_trip_ms = j.value("store_trip_ms", -1.0);
    for (const json& g : j.at("groups")) {
      d.groups.push_back({g.at("label").get<std::string>(), g.at("key").get<std::string>(), "",
                          g.at("ranks").get<std::vector<int>>(), g.at("rank").get<int>(),
                          g.at("collectives").get<uint64_t>()});
      for (int r : d.groups.back().ranks)
        VS_USER_CHECK(r >= 0, "[diagnose] {}: group {} has a negative rank {}", path,
                      d.groups.back().label, r);
    }
    for (const json& e : j.at("entries")) {
      Call c;
      c.id = e.at("id").get<uint64_t>();
      c.group = e.at("group").get<int>();
      c.transfer = e.at("transfer").get<bool>();
      c.seq = e.at("seq").get<uint64_t>();
      c.op = e.at("op").get<std::string>();
      c.bytes = e.at("bytes").get<int64_t>();
      c.peer = e.value("peer", -1);
      c.step = e.at("step").get<int64_t>();
      c.micro_batch = e.at("micro_batch").get<int>();
      c.site = e.at("site").get<std::string>();
      c.start_s = e.at("start_s").get<double>();
      c.end_s = e.value("end_s", 0.0);
      c.state = e.at("state").get<std::string>();
      VS_USER_CHECK(c.group >= 0 && c.group < static_cast<int>(d.groups.size()),
                    "[diagnose] {}: entry {} names group {}, but the dump has {} groups", path,
                    c.id, c.group, d.groups.size());
      const auto members = d.groups[static_cast<size_t>(c.group)].ranks.size();
      VS_USER_CHECK(!c.transfer || (c.peer >= 0 && static_cast<size_t>(c.peer) < members),
                    "[diagnose] {}: transfer {} names peer {} of a group of {} ranks", path, c.id,
                    c.peer, members);
      d.calls.push_back(std::move(c));
    }
  } catch (const json::exception& e) {
    throw UserError(
        fmt::format("[diagnose] {} is not a readable flight recorder dump: {}", path, e.what()));
  }
  return d;
}

std::string group_name(const GroupState& g) {
  return g.name.empty() ? fmt::format("{} group [{}]", g.label, fmt::join(g.ranks, ", ")) : g.name;
}

/// How a call stands at the dump: "in flight for 12.3 s", "failed after 1.0 s", "done".
std::string standing(const Dump& d, const Call& c) {
  if (c.state == "waiting") return fmt::format("blocked in it for {:.1f} s", d.now_s - c.start_s);
  if (c.state == "posted")
    return fmt::format("posted {:.1f} s before, not waited for yet", d.now_s - c.start_s);
  if (c.state == "failed") return fmt::format("failed after {:.1f} s", c.end_s - c.start_s);
  return c.state;
}

/// "all_reduce #812 of step 57 (micro-batch 1, bucket 2; in flight for 3.0 s)",
/// "send #88 to pp rank 1 of step 57 (done)".
std::string describe(const Dump& d, const Call& c, bool with_group) {
  const GroupState& g = d.groups[static_cast<size_t>(c.group)];
  std::string text = fmt::format("{} #{}", c.op, c.seq);
  if (c.transfer) {
    text += fmt::format(" {} {} rank {}", c.op == "send" ? "to" : "from", g.label,
                        g.ranks.at(static_cast<size_t>(c.peer)));
  } else if (with_group) {
    text += " over the " + group_name(g);
  }
  if (c.step >= 0) text += fmt::format(" of step {}", c.step);
  std::vector<std::string> context;
  if (c.micro_batch >= 0) context.push_back(fmt::format("micro-batch {}", c.micro_batch));
  if (!c.site.empty()) context.push_back(c.site);
  const std::string where = fmt::format("{}", fmt::join(context, ", "));
  return fmt::format("{} ({}{}{})", text, where, where.empty() ? "" : "; ", standing(d, c));
}

/// How long a rank must have been blocked in a call for the diagnosis to call it stuck there.
constexpr double kStuckWaitS = 1.0;

/// Whether call `c` holds its rank up: it failed, or the rank has been blocked in it a while.
bool held_up(const Dump& d, const Call& c) {
  return c.state == "failed" || (c.state == "waiting" && d.now_s - c.start_s >= kStuckWaitS);
}

/// The call a rank is blocked in, else its last.
const Call* last_call(const Dump& d) {
  for (const Call& c : d.calls)
    if (c.state == "waiting") return &c;
  return d.calls.empty() ? nullptr : &d.calls.back();
}

/// Whether the rank is blocked in a call of comm/, or was until it failed (its timeout fired
/// while it waited for another rank: a victim, not a cause).
bool blocked(const Dump& d) {
  return std::any_of(d.calls.begin(), d.calls.end(),
                     [](const Call& c) { return c.state == "waiting" || c.state == "failed"; });
}

}  // namespace

std::string flight_folder(const std::string& dump_folder) {
  return (fs::path(dump_folder) / "flight").string();
}

std::string flight_dump_file(const std::string& dump_folder, int rank) {
  return (fs::path(flight_folder(dump_folder)) / fmt::format("rank-{}.json", rank)).string();
}

std::vector<FlightDumpFile> flight_dumps(const std::string& folder) {
  std::vector<FlightDumpFile> found;
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) return {};
  // Ranks of at most 9 digits (a larger one is no rank of a job; stoi could not hold it).
  static const std::regex name(R"(rank-(\d{1,9})\.json)");
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    std::smatch m;
    const std::string file = entry.path().filename().string();
    if (std::regex_match(file, m, name)) found.push_back({std::stoi(m[1]), entry.path().string()});
  }
  std::sort(found.begin(), found.end(),
            [](const FlightDumpFile& a, const FlightDumpFile& b) { return a.rank < b.rank; });
  return found;
}

namespace {

using Dumps = std::map<int, Dump>;

/// One group's line, most telling first: 0 where a rank the others wait for is in no call.
struct GroupLine {
  int priority = 0;
  std::string text;
};

/// The members of `group` that reached collective #seq (or passed it), as the line says them.
std::vector<std::string> reached_parts(const Dumps& dumps, const GroupState& group,
                                       const std::map<int, uint64_t>& reached, uint64_t seq) {
  std::vector<std::string> parts;
  for (const auto& [r, n] : reached) {
    if (n < seq) continue;
    const Dump& d = dumps.at(r);
    const Call* c = d.collective(d.group_index(group.key), seq);
    if (c == nullptr) {
      parts.push_back(fmt::format("rank {} passed #{} (it reached #{})", r, seq, n));
      continue;
    }
    parts.push_back(fmt::format("rank {} {} {}{}", r, c->state == "failed" ? "was in" : "is in",
                                describe(d, *c, false),
                                n > seq ? fmt::format(" and reached #{}", n) : ""));
  }
  return parts;
}

/// The line of a group whose members reached different sequence numbers: the first collective
/// not all of them entered, who is in it, and what the others did last. Adds the ranks behind
/// to `behind`.
GroupLine diverged_line(const Dumps& dumps, const GroupState& group,
                        const std::map<int, uint64_t>& reached, uint64_t least,
                        std::set<int>& behind) {
  const uint64_t seq = least + 1;
  // Nothing is stuck here unless a member failed in #seq or has been blocked in it a while: a
  // member that completed it proves every member entered it, and short waits are those of a
  // running job whose ranks dumped at slightly different moments (a dump on demand).
  std::vector<std::string> positions;
  bool stuck = false;
  for (const auto& [r, n] : reached) {
    const Dump& d = dumps.at(r);
    const Call* c = d.collective(d.group_index(group.key), seq);
    stuck = stuck || (c != nullptr && held_up(d, *c));
    positions.push_back(fmt::format("rank {} at #{}", r, n));
  }
  if (!stuck)
    return {3, fmt::format("{}: running, dumped at different moments ({})", group_name(group),
                           fmt::join(positions, ", "))};
  std::vector<std::string> parts = reached_parts(dumps, group, reached, seq);
  GroupLine line{1, ""};
  for (const auto& [r, n] : reached) {
    if (n >= seq) continue;
    behind.insert(r);
    const Dump& d = dumps.at(r);
    if (!blocked(d)) line.priority = 0;
    const Call* last = last_call(d);
    parts.push_back(last != nullptr
                        ? fmt::format("rank {} never entered it (it reached #{}), its last call "
                                      "was {}",
                                      r, n, describe(d, *last, true))
                        : fmt::format("rank {} never entered it (it reached #{}) and recorded no "
                                      "call",
                                      r, n));
  }
  line.text = fmt::format("{}: {}", group_name(group), fmt::join(parts, "; "));
  return line;
}

/// The line of a group whose members all reached #n, when some are blocked in it or failed;
/// nothing when the group is in step.
std::optional<GroupLine> stuck_line(const Dumps& dumps, const GroupState& group,
                                    const std::map<int, uint64_t>& reached, uint64_t n) {
  std::vector<std::string> in_it;
  std::string example;
  for (const auto& [r, count] : reached) {
    const Dump& d = dumps.at(r);
    const Call* c = d.collective(d.group_index(group.key), n);
    if (c != nullptr && held_up(d, *c)) {
      in_it.push_back(std::to_string(r));
      example = describe(d, *c, false);
    }
  }
  if (in_it.empty() || n == 0) return std::nullopt;
  return GroupLine{
      2, fmt::format("{}: every rank with a dump reached #{}; rank{} {} {} in {}",
                     group_name(group), n, in_it.size() == 1 ? "" : "s", fmt::join(in_it, ", "),
                     in_it.size() == 1 ? "is" : "are", example)};
}

/// A rank the others wait for that is in no call itself, or a rank that wrote no dump.
std::vector<std::string> likely_causes(const Dumps& dumps, const std::set<int>& behind,
                                       const std::set<int>& known) {
  std::vector<std::string> causes;
  for (int r : behind) {
    if (!blocked(dumps.at(r)))
      causes.push_back(
          fmt::format("rank {} is in no call of comm/ (stuck in compute, data, I/O "
                      "or a deadlock outside collectives), and others wait for it",
                      r));
  }
  for (int r : known) {
    if (dumps.count(r) == 0)
      causes.push_back(
          fmt::format("rank {} wrote no dump (it died, was stopped, or hangs so hard "
                      "that its process cannot write)",
                      r));
  }
  return causes;
}

/// Every dump of `files`, one run's: dumps of two runs (an old one left in the folder) are not
/// one run's moment.
Dumps read_run_dumps(const std::vector<FlightDumpFile>& files) {
  Dumps dumps;
  std::string run_id, run_path;
  for (const auto& [file_rank, path] : files) {
    Dump d = read_dump(path, file_rank);
    if (!d.run_id.empty() && !run_id.empty() && d.run_id != run_id) {
      throw UserError(fmt::format(
          "[diagnose] {} is of run {} and {} of run {}: the folder holds dumps of two runs; "
          "diagnose one run's dumps (move the other's away)",
          path, d.run_id, run_path, run_id));
    }
    if (run_id.empty() && !d.run_id.empty()) {
      run_id = d.run_id;
      run_path = path;
    }
    dumps[d.rank] = std::move(d);
  }
  return dumps;
}

/// Every group any rank knows, by key; two of one label and members are named with their keys
/// (in `dumps` too). `known` gets the ranks the dumps know of: their own and their groups'
/// members (never 0..max, which a rank number of 10^9 would make a billion).
std::map<std::string, GroupState> known_groups(Dumps& dumps, std::set<int>& known) {
  std::map<std::string, GroupState> groups;
  for (const auto& [rank, d] : dumps) {
    known.insert(rank);
    for (const GroupState& g : d.groups) {
      groups.emplace(g.key, g);
      known.insert(g.ranks.begin(), g.ranks.end());
    }
  }
  std::map<std::string, int> named;
  for (const auto& [key, g] : groups)
    ++named[group_name(g)];
  for (auto& [key, g] : groups)
    if (named[group_name(g)] > 1) g.name = fmt::format("{} ({})", group_name(g), key);
  for (auto& [rank, d] : dumps)
    for (GroupState& g : d.groups)
      g.name = groups.at(g.key).name;
  return groups;
}

/// One group's standing: a line where its members diverged, are stuck or left no dump (ranks
/// behind added to `behind`), else its place in `in_step`.
void group_standing(const Dumps& dumps, const GroupState& group, std::vector<GroupLine>& lines,
                    std::set<int>& behind, std::vector<std::string>& in_step) {
  // Each member's count of collectives posted on this group.
  std::map<int, uint64_t> reached;
  uint64_t most = 0, least = UINT64_MAX;
  for (int r : group.ranks) {
    auto it = dumps.find(r);
    const int g = it == dumps.end() ? -1 : it->second.group_index(group.key);
    if (g < 0) {
      lines.push_back({1, fmt::format("{}: rank {} wrote no dump", group_name(group), r)});
      continue;
    }
    const uint64_t n = it->second.groups[static_cast<size_t>(g)].collectives;
    reached[r] = n;
    most = std::max(most, n);
    least = std::min(least, n);
  }
  if (reached.empty()) return;
  if (most != least) {
    lines.push_back(diverged_line(dumps, group, reached, least, behind));
  } else if (auto line = stuck_line(dumps, group, reached, most)) {
    lines.push_back(*line);
  } else {
    in_step.push_back(fmt::format("{} at #{}", group_name(group), most));
  }
}

/// NOTE [Peer heartbeat]: the nodes whose round trips to the store the dumps show slow.
std::vector<std::string> slow_link_lines(const Dumps& dumps) {
  std::vector<peer_watch::Trip> trips;
  for (const auto& [rank, d] : dumps)
    if (!d.node.empty() && d.store_trip_ms >= 0) trips.push_back({rank, d.node, d.store_trip_ms});
  std::vector<std::string> lines;
  for (const peer_watch::SlowLink& link : peer_watch::slow_links(trips))
    lines.push_back(fmt::format("slow link: {} (the slowest of each rank's last 5 heartbeats)",
                                peer_watch::describe(link)));
  return lines;
}

}  // namespace

std::string diagnose_flight(const std::string& folder) {
  std::string dir = folder;
  if (flight_dumps(dir).empty() && !flight_dumps(flight_folder(folder)).empty())
    dir = flight_folder(folder);
  const std::vector<FlightDumpFile> files = flight_dumps(dir);
  VS_USER_CHECK(!files.empty(),
                "[diagnose] no flight recorder dumps (rank-N.json) in {} or {}: a rank dumps "
                "when a collective fails or times out, on SIGUSR1, when stuck after SIGTERM, or "
                "after the step comm.flight_recorder_dump",
                folder, flight_folder(folder));
  Dumps dumps = read_run_dumps(files);
  std::set<int> known;
  const std::map<std::string, GroupState> groups = known_groups(dumps, known);

  std::vector<GroupLine> group_lines;
  std::set<int> behind;
  std::vector<std::string> in_step;
  for (const auto& [key, group] : groups)
    group_standing(dumps, group, group_lines, behind, in_step);
  std::stable_sort(group_lines.begin(), group_lines.end(),
                   [](const GroupLine& a, const GroupLine& b) { return a.priority < b.priority; });

  std::vector<std::string> lines;
  lines.push_back(fmt::format("[diagnose] flight recorder dumps of {} of {} ranks in {}:",
                              dumps.size(), known.size(), dir));
  for (const auto& [rank, d] : dumps)
    lines.push_back(fmt::format("  rank {}: {}", rank, d.reason));
  for (const GroupLine& line : group_lines)
    lines.push_back(line.text);
  if (!in_step.empty()) lines.push_back(fmt::format("in step: {}", fmt::join(in_step, ", ")));
  for (const std::string& link : slow_link_lines(dumps))
    lines.push_back(link);
  const std::vector<std::string> causes = likely_causes(dumps, behind, known);
  if (!causes.empty()) lines.push_back(fmt::format("likely cause: {}", fmt::join(causes, "; ")));
  return fmt::format("{}\n", fmt::join(lines, "\n"));
}

}  // namespace vescale::comm
