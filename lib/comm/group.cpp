#include "comm/group.h"

#include <numeric>

#include "comm/group_impl.h"

namespace vescale::comm {

void Work::wait() {
  if (!impl_ || impl_->done) return;
  impl_->keep_alive->wait(impl_->posted, impl_->what);
  if (impl_->finish) impl_->finish();
  impl_->done = true;
}

Group Group::create(const Store& store, int rank, int world, GroupOptions options,
                    std::shared_ptr<CommStats> stats) {
  VS_CHECK(world >= 1 && rank >= 0 && rank < world, "[comm] rank {} is not in a world of {}", rank,
           world);
  auto impl = std::make_shared<Impl>();
  impl->root_store = store.impl()->store;
  impl->prefix = "vescale/" + options.label;
  impl->options = options;
  impl->backend = resolve_backend(options.backend, options.device);
  impl->rank = rank;
  impl->size = world;
  impl->root_ranks.resize(world);
  std::iota(impl->root_ranks.begin(), impl->root_ranks.end(), 0);
  impl->stats = stats ? std::move(stats) : std::make_shared<CommStats>();
  impl->flight = std::make_shared<FlightRecorder>(rank, options.flight_entries);
  if (world > 1)
    impl->flight_group =
        impl->flight->add_group(options.label, impl->root_ranks, rank, impl->prefix);
  if (world > 1) impl->connect();
  return Group(std::move(impl));
}

Group Group::split(const std::vector<std::vector<int>>& partition, const std::string& label) const {
  const uint64_t split_id = impl_->splits++;
  std::vector<int> seen(impl_->size, 0);
  const std::vector<int>* mine = nullptr;
  for (const auto& members : partition) {
    for (int r : members) {
      VS_CHECK(r >= 0 && r < impl_->size && seen[r]++ == 0,
               "[comm] split of {}: rank {} is out of range or listed twice", impl_->describe(), r);
      if (r == impl_->rank) mine = &members;
    }
  }
  VS_CHECK(std::all_of(seen.begin(), seen.end(), [](int s) { return s == 1; }),
           "[comm] split of {}: the partition must list every rank once", impl_->describe());

  auto impl = std::make_shared<Impl>();
  impl->root_store = impl_->root_store;
  impl->prefix =
      fmt::format("{}/split{}/{}/{}", impl_->prefix, split_id, label, fmt::join(*mine, "-"));
  impl->options = impl_->options;
  impl->options.label = label;
  impl->backend = impl_->backend;
  impl->rank = static_cast<int>(std::find(mine->begin(), mine->end(), impl_->rank) - mine->begin());
  impl->size = static_cast<int>(mine->size());
  for (int r : *mine)
    impl->root_ranks.push_back(impl_->root_ranks[r]);
  impl->stats = impl_->stats;
  impl->flight = impl_->flight;
  if (impl->size > 1) {
    impl->flight_group = impl->flight->add_group(label, impl->root_ranks, impl->rank, impl->prefix);
    impl->connect();
  }
  return Group(std::move(impl));
}

int Group::rank() const {
  return impl_->rank;
}
int Group::size() const {
  return impl_->size;
}
const std::string& Group::label() const {
  return impl_->options.label;
}
Backend Group::backend() const {
  return impl_->backend;
}
Device Group::device() const {
  return impl_->options.device;
}
const std::vector<int>& Group::root_ranks() const {
  return impl_->root_ranks;
}
CommStats& Group::stats() const {
  return *impl_->stats;
}
const std::shared_ptr<FlightRecorder>& Group::flight() const {
  return impl_->flight;
}
std::string Group::str() const {
  return impl_->describe();
}

}  // namespace vescale::comm
