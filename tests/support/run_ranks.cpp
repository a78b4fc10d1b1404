#include "support/run_ranks.h"

#include <cstdio>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace vescale::testing {

void run_ranks(int world, const std::function<void(const comm::Group& world)>& fn,
               comm::GroupOptions options) {
  if (options.backend == comm::Backend::kAuto) options.backend = comm::Backend::kGloo;
  // A failing rank leaves its peers waiting in a collective: keep that wait short.
  options.timeout = std::min(options.timeout, std::chrono::milliseconds(std::chrono::seconds(60)));
  const comm::Store store = comm::Store::in_memory();
  std::mutex mutex;
  std::exception_ptr first_error;
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        const comm::Group group = comm::Group::create(store, rank, world, options);
        fn(group);
        // Keep every rank's group alive until all are done: Gloo needs its peers to tear down.
        group.barrier();
      } catch (const std::exception& e) {
        // Every rank's error is printed: the first to arrive is often a peer's consequence.
        std::lock_guard<std::mutex> lock(mutex);
        std::fprintf(stderr, "[run_ranks] rank %d of %d: %s\n", rank, world, e.what());
        if (!first_error) first_error = std::current_exception();
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!first_error) first_error = std::current_exception();
      }
    });
  }
  for (auto& t : threads)
    t.join();
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace vescale::testing
