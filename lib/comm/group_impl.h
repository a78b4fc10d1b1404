// What a Group and a Work hold, shared by the files that implement them: group.cpp (creation,
// splits), group_connect.cpp (connecting, NOTE [Connect retry]), collectives.cpp and p2p.cpp.
// Internal to comm/.
#pragma once

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/c10d_compat.h"
#include "comm/flight_recorder.h"
#include "comm/group.h"
#include "comm/peer_watch.h"
#include "core/error.h"
#include "core/heartbeat.h"

namespace vescale::comm {
namespace detail {

/// Whether a failure's message says it timed out.
inline bool is_timeout(const std::string& message) {
  std::string lower = message;
  std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
  return lower.find("timed out") != std::string::npos || lower.find("timeout") != std::string::npos;
}

}  // namespace detail

using detail::BackendBase;
using detail::is_timeout;

struct Group::Impl {
  c10::intrusive_ptr<::c10d::Store> root_store;  // unprefixed: splits derive their own prefixes
  std::string prefix;
  c10::intrusive_ptr<BackendBase> pg;  // null for a group of size 1
  GroupOptions options;
  Backend backend = Backend::kGloo;
  int rank = 0;
  int size = 1;
  std::vector<int> root_ranks;
  std::shared_ptr<CommStats> stats;
  std::shared_ptr<FlightRecorder> flight;   // the rank's, shared by its groups
  int flight_group = -1;                    // this group's index in it
  mutable std::atomic<uint64_t> splits{0};  // same count on every rank: split() is collective

  std::string describe() const {
    return fmt::format("{}[{}/{} of {}] {}", options.label, rank, size, fmt::join(root_ranks, ","),
                       backend_name(backend));
  }

  void record(CommKind kind, int64_t bytes) const { stats->record(options.label, kind, bytes); }

  /// Tensors handed to the group must live on its device.
  void check_device(const at::Tensor& tensor, const char* what) const {
    VS_CHECK(tensor.device() == options.device,
             "[comm] {} over {}: the tensor is on {}, but the group works on {}", what, describe(),
             tensor.device().str(), options.device.str());
  }

  /// Runs a c10d call and turns its failures into our errors, naming the collective and group.
  template <typename F>
  auto guarded(const char* what, F&& f) const {
    try {
      return f();
    } catch (const vescale::Error&) {
      throw;
    } catch (const c10::Error& e) {
      fail(what, e.what_without_backtrace());
    } catch (const std::exception& e) {
      fail(what, e.what());
    }
  }

  [[noreturn]] void fail(const char* what, const std::string& reason) const {
    // NOTE [Peer heartbeat]: which members stopped beating, where a beat runs.
    std::string message =
        fmt::format("[comm] {} over {} failed (timeout {}s): {}{}", what, describe(),
                    options.timeout.count() / 1000.0, reason, peer_watch::explain(root_ranks));
    if (is_timeout(reason)) throw TimeoutError(message);
    throw Error(message);
  }

  // NOTE [Gloo with CUDA tensors]
  // Gloo moves host memory. A CUDA tensor handed to a Gloo group (ranks sharing a GPU, NOTE [Ranks
  // sharing a GPU]) goes through a host buffer of its own, for every collective and transfer
  // alike, whatever CUDA path the backend's build may have: on_wire copies it into pinned host
  // memory, and each call copies what arrived back into the caller's tensor (the `!is_same` copies
  // in collectives.cpp and p2p.cpp). The order that makes it correct, on the calling thread's
  // current stream:
  //   - the copy to the host is a blocking copy: it waits for the stream's kernels that wrote the
  //     tensor, so Gloo's threads read finished values;
  //   - the copy back is made after the Work is waited for, on the same stream, before any kernel
  //     the caller then queues reads it; the host buffer lives in the Work until then.
  // An asynchronous call (a gradient bucket's all-reduce, ZeRO's prefetching all-gather) is
  // staged when posted and copied back when waited for, as its CPU form is. bf16 travels as
  // float32 (Gloo has no bfloat16), as on the CPU. GroupOptions::stage_on_host stages CPU tensors
  // the same way, through buffers of their own, for the CPU's tests.

  /// A tensor as the backend can carry it, contiguous: on Gloo, bf16 as float32 and CUDA tensors
  /// in host memory (byte counts stay those of the tensor, what NCCL sends).
  at::Tensor on_wire(const at::Tensor& t) const {
    if (backend == Backend::kGloo && (t.is_cuda() || options.stage_on_host)) {
      const at::ScalarType type = t.scalar_type() == at::kBFloat16 ? at::kFloat : t.scalar_type();
      at::Tensor host = at::empty(
          t.sizes(), at::TensorOptions().dtype(type).device(at::kCPU).pinned_memory(t.is_cuda()));
      return host.copy_(t);  // blocking: waits for t's writers on the current stream
    }
    if (backend == Backend::kGloo && t.scalar_type() == at::kBFloat16) return t.to(at::kFloat);
    return t.is_contiguous() ? t : t.contiguous();
  }

  /// alltoall_base with split counts. c10d takes the counts by reference and moves from them,
  /// so they are passed as copies.
  void alltoall(at::Tensor& output, at::Tensor& input, std::vector<int64_t> out_counts,
                std::vector<int64_t> in_counts, const char* what) const {
    ::c10d::AllToAllOptions opts;
    opts.timeout = options.timeout;
    at::Tensor in = on_wire(input);
    at::Tensor out = in.is_same(input) ? output : at::empty(output.sizes(), in.options());
    wait(post(what, false, static_cast<int64_t>(in.nbytes()),
              [&] { return pg->alltoall_base(out, in, out_counts, in_counts, opts); }),
         what);
    if (!out.is_same(output)) output.copy_(out);
  }

  /// Connects the group's backend, agreeing with every member after each attempt whether all
  /// succeeded and connecting again if not (NOTE [Connect retry]).
  void connect();
  /// Adds this member's `outcome` to the attempt's counter in `store` and, unless `fatal`, waits
  /// for every member's; returns the sum (0: every member connected).
  int64_t agree(const c10::intrusive_ptr<::c10d::Store>& store, int64_t outcome, bool fatal) const;

  /// A c10d call in flight and its flight recorder entry.
  struct Posted {
    c10::intrusive_ptr<::c10d::Work> work;
    uint64_t entry = 0;
  };

  /// Records a call in the flight recorder (NOTE [Flight recorder]) and posts it: `issue` makes
  /// the c10d call. `bytes`: what this rank hands it; `peer`: a transfer's (group rank).
  template <typename F>
  Posted post(const char* what, bool transfer, int64_t bytes, F&& issue, int peer = -1) const {
    const uint64_t entry = flight->begin(flight_group, transfer, what, bytes, peer);
    try {
      return {guarded(what, std::forward<F>(issue)), entry};
    } catch (const std::exception& e) {
      failed(entry, e.what());
      throw;
    }
  }

  /// Waits for a posted call, at most the group's timeout.
  void wait(const Posted& posted, const char* what) const {
    heartbeat::WaitScope waiting;  // NOTE [Heartbeat]
    const auto start = std::chrono::steady_clock::now();
    flight->waiting(posted.entry);
    try {
      guarded(what, [&] { return posted.work->wait(options.timeout); });
    } catch (const std::exception& e) {
      failed(posted.entry, e.what());
      throw;
    }
    flight->end(posted.entry, FlightState::kDone);
    // NOTE [Step anatomy]: the time this rank was blocked, by mesh dim.
    stats->record_wait(
        options.label,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }

  /// A call failed or timed out: the recorder says so and dumps (NOTE [Flight recorder]).
  void failed(uint64_t entry, const std::string& message) const {
    flight->end(entry, FlightState::kFailed);
    flight->dump(message);
  }
};

struct Work::Impl {
  std::shared_ptr<const Group::Impl> keep_alive;
  Group::Impl::Posted posted;
  std::function<void()> finish;
  const char* what = "";
  bool done = false;
};

}  // namespace vescale::comm
