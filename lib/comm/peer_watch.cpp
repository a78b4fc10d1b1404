#include "comm/peer_watch.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "comm/c10d_compat.h"
#include "comm/flight_recorder.h"

namespace vescale::comm::peer_watch {
namespace {

using Clock = std::chrono::steady_clock;
using StorePtr = c10::intrusive_ptr<::c10d::Store>;

constexpr auto kPeriod = std::chrono::seconds(1);
constexpr auto kQuiet = std::chrono::milliseconds(2500);  // no count moved: stopped
constexpr auto kCallTimeout = std::chrono::seconds(5);
constexpr int kTripWindow = 5;
constexpr int kLinkCheckEvery = 5;  // beats
constexpr double kSlowMs = 50;
constexpr double kSlowFactor = 10;

std::string key(const char* what, int rank) {
  return fmt::format("vescale/peer/{}/{}", what, rank);
}

struct State {
  Where where;
  std::string node;
  std::atomic<int64_t> last_ok_ms{-1};  // Clock ms of the last beat the store took
  std::atomic<int64_t> trip_us{-1};
};

// Made once and never freed: the beating thread outlives main's statics.
std::atomic<State*> g_state{nullptr};

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch())
      .count();
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "?";
  return name;
}

StorePtr connect(const Where& w, std::chrono::milliseconds timeout) {
  StorePtr store = Store::tcp_client(w.store_host, w.store_port, timeout).impl()->store;
  if (w.prefix.empty()) return store;
  return c10::make_intrusive<::c10d::PrefixStore>(w.prefix, store);
}

std::string text_of(const std::vector<uint8_t>& bytes) {
  return std::string(bytes.begin(), bytes.end());
}

/// Every 5th beat of rank 0: warns of links that turned slow, and of those that mended.
class LinkWatch {
 public:
  void check(::c10d::Store& store, int world) {
    std::vector<Trip> trips;
    for (int r = 0; r < world; ++r) {
      if (!store.check({key("trip", r)})) continue;
      auto node = nodes_.find(r);
      if (node == nodes_.end()) {
        if (!store.check({key("node", r)})) continue;
        node = nodes_.emplace(r, text_of(store.get(key("node", r)))).first;
      }
      const double us = std::stod(text_of(store.get(key("trip", r))));
      if (us >= 0) trips.push_back({r, node->second, us / 1000.0});
    }
    std::set<std::string> now_slow;
    for (const SlowLink& link : slow_links(trips)) {
      now_slow.insert(link.node);
      if (!slow_.count(link.node))
        spdlog::warn("[heartbeat] a slow link: {}; collectives that cross it wait for it",
                     describe(link));
    }
    for (const std::string& node : slow_)
      if (!now_slow.count(node))
        spdlog::info("[heartbeat] node {} reaches the store as fast as the others again", node);
    slow_ = std::move(now_slow);
  }

 private:
  std::map<int, std::string> nodes_;
  std::set<std::string> slow_;
};

void beat_forever(State* state) {
  StorePtr store;
  std::deque<int64_t> trips;
  LinkWatch links;
  for (uint64_t beat = 0;; ++beat) {
    try {
      if (!store) {
        store = connect(state->where, kCallTimeout);
        store->set(key("node", state->where.rank),
                   std::vector<uint8_t>(state->node.begin(), state->node.end()));
      }
      const auto start = Clock::now();
      store->add(key("beat", state->where.rank), 1);
      trips.push_back(
          std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count());
      if (trips.size() > kTripWindow) trips.pop_front();
      const int64_t slowest = *std::max_element(trips.begin(), trips.end());
      const std::string text = std::to_string(slowest);
      store->set(key("trip", state->where.rank), std::vector<uint8_t>(text.begin(), text.end()));
      state->trip_us = slowest;
      state->last_ok_ms = now_ms();
      if (state->where.rank == 0 && beat % kLinkCheckEvery == kLinkCheckEvery - 1)
        links.check(*store, state->where.world);
    } catch (const std::exception&) {
      store.reset();  // a connection that timed out mid-call is not trusted again
    }
    std::this_thread::sleep_for(kPeriod);
  }
}

/// `f()` on a thread of its own, waited for at most `limit`; nullopt if it threw or is late (the
/// thread is then left to finish or block on its own).
template <typename T, typename F>
std::optional<T> bounded(F f, std::chrono::milliseconds limit) {
  auto task = std::make_shared<std::packaged_task<T()>>(std::move(f));
  std::future<T> result = task->get_future();
  std::thread([task] { (*task)(); }).detach();
  if (result.wait_for(limit) != std::future_status::ready) return std::nullopt;
  try {
    return result.get();
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

using Counts = std::map<int, std::string>;

Counts read_counts(::c10d::Store& store, const std::vector<int>& ranks) {
  Counts counts;
  for (int r : ranks)
    counts[r] = store.check({key("beat", r)}) ? text_of(store.get(key("beat", r))) : "";
  return counts;
}

std::string node_of(::c10d::Store& store, int rank) {
  return store.check({key("node", rank)}) ? text_of(store.get(key("node", rank))) : "?";
}

/// "ranks 2, 3 on node 10.9.0.3 and rank 5 on node 10.9.0.4".
std::string by_node(const std::map<std::string, std::vector<int>>& stopped) {
  std::vector<std::string> parts;
  for (const auto& [node, ranks] : stopped)
    parts.push_back(fmt::format("{} {} on node {}", ranks.size() == 1 ? "rank" : "ranks",
                                fmt::join(ranks, ", "), node));
  return fmt::format("{}", fmt::join(parts, " and "));
}

std::string explain_with(const State& state, const std::vector<int>& others) {
  const Where& w = state.where;
  const std::string store_at = fmt::format("{}:{}", w.store_host, w.store_port);
  const int64_t last_ok = state.last_ok_ms.load();
  if (last_ok < 0 || now_ms() - last_ok > 3 * kPeriod.count() * 1000)
    return fmt::format(
        "; this rank's heartbeat has not reached the store at {} for {}: this node ({}) is cut "
        "off from the store's node, or the store's rank ended",
        store_at,
        last_ok < 0 ? std::string("ever") : fmt::format("{:.1f} s", (now_ms() - last_ok) / 1000.0),
        state.node);
  const auto limit =
      std::chrono::duration_cast<std::chrono::milliseconds>(kQuiet) + std::chrono::seconds(3);
  auto stopped = bounded<std::map<std::string, std::vector<int>>>(
      [w, others] {
        StorePtr store = connect(w, std::chrono::seconds(2));
        const Counts before = read_counts(*store, others);
        std::this_thread::sleep_for(kQuiet);
        const Counts after = read_counts(*store, others);
        std::map<std::string, std::vector<int>> quiet;
        for (int r : others)
          if (before.at(r) == after.at(r)) quiet[node_of(*store, r)].push_back(r);
        return quiet;
      },
      limit);
  // The store's rank serves the others' reads a little longer before its process ends.
  if (w.serves_store) std::this_thread::sleep_for(std::chrono::seconds(1));
  if (!stopped)
    return fmt::format(
        "; the store at {} stopped answering while this rank read the others' "
        "heartbeats (its rank may have ended)",
        store_at);
  if (stopped->empty())
    return "; every other member still beats (a slow or stuck member, not a lost one: see "
           "`vescale-train diagnose` of the flight dumps)";
  return fmt::format(
      "; {} sent no heartbeat to the store in {:.1f} s: that node died or is cut off",
      by_node(*stopped), kQuiet.count() / 1000.0);
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

std::string ms_text(double ms) {
  return ms >= 10 ? fmt::format("{:.0f} ms", ms) : fmt::format("{:.1f} ms", ms);
}

}  // namespace

void start(const Where& where) {
  static std::once_flag once;
  std::call_once(once, [&] {
    auto* state = new State{};
    state->where = where;
    state->node = host_name();
    g_state = state;
    set_node_facts([] { return NodeFacts{node(), trip_ms()}; });  // in flight recorder dumps
    std::thread(beat_forever, state).detach();
  });
}

std::string explain(const std::vector<int>& members) {
  const State* state = g_state.load();
  if (state == nullptr) return "";
  std::vector<int> others;
  for (int r : members)
    if (r != state->where.rank) others.push_back(r);
  if (others.empty()) return "";
  return explain_with(*state, others);
}

std::string node() {
  const State* state = g_state.load();
  return state ? state->node : "";
}

double trip_ms() {
  const State* state = g_state.load();
  return state && state->trip_us.load() >= 0 ? state->trip_us.load() / 1000.0 : -1;
}

std::vector<SlowLink> slow_links(const std::vector<Trip>& trips) {
  std::map<std::string, SlowLink> nodes;
  for (const Trip& t : trips) {
    SlowLink& n = nodes[t.node];
    if (n.ranks.empty() || t.ms < n.ms) n.ms = t.ms;
    n.node = t.node;
    n.ranks.push_back(t.rank);
  }
  std::vector<SlowLink> slow;
  if (nodes.size() < 2) return slow;
  for (auto& [name, link] : nodes) {
    std::vector<double> others;
    for (const auto& [other, o] : nodes)
      if (other != name) others.push_back(o.ms);
    link.others_ms = median(others);
    if (link.ms >= kSlowMs && link.ms >= kSlowFactor * link.others_ms) {
      std::sort(link.ranks.begin(), link.ranks.end());
      slow.push_back(link);
    }
  }
  return slow;
}

std::string describe(const SlowLink& link) {
  return fmt::format("node {} ({} {}) reaches the store in {}, the other nodes in {}", link.node,
                     link.ranks.size() == 1 ? "rank" : "ranks", fmt::join(link.ranks, ", "),
                     ms_text(link.ms), ms_text(link.others_ms));
}

}  // namespace vescale::comm::peer_watch
