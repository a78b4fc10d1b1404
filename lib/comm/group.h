// A group of ranks and its collectives: the only door to c10d (Gloo on the CPU, NCCL on CUDA, Gloo
// with CUDA tensors where ranks share a GPU: NOTE [Gloo with CUDA tensors]).
//
// Every method marked *collective* must be called by every rank of the group, in the same order.
// Every collective and point-to-point transfer waits at most the group's timeout and then throws
// TimeoutError. Each counts its bytes in the rank's CommStats under the group's label
// (see NOTE [Communication volume]). A group of size 1 is a real group whose collectives return
// at once, move nothing and count nothing. A group works on one device (the rank's): the tensors
// given to it must live there, and the tensors it makes are made there.
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/backend.h"
#include "comm/comm_stats.h"
#include "comm/flight_recorder.h"
#include "comm/reduce_op.h"
#include "comm/store.h"
#include "core/device.h"
#include "core/enum_names.h"

namespace vescale::comm {

struct GroupOptions {
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  Backend backend = Backend::kAuto;  ///< kAuto: NCCL on a CUDA device, else Gloo
  /// Label under which the group's bytes are counted ("world", "tp", ...).
  std::string label = "world";
  /// Address Gloo binds to; empty: from GLOO_SOCKET_IFNAME, else this host's name.
  std::string gloo_host = "127.0.0.1";
  /// Where the group's tensors live: the rank's device (NCCL needs its GPU).
  Device device = kCpu;
  /// Called on each member after each attempt to connect a group with these options (a split
  /// inherits them) has made its backend: with the group's label, the member's rank in it and the
  /// attempt (from 1). An exception it throws fails the attempt on this member as a lost
  /// connection does, a vescale::Error as our own error does (NOTE [Connect retry]). Tests fail
  /// connects with it; empty: nothing is called.
  std::function<void(const std::string& label, int rank, int attempt)> on_connect_attempt;
  /// Calls the rank's flight recorder keeps (NOTE [Flight recorder]); 0: sequence numbers only.
  size_t flight_entries = 4096;
  /// Gloo: stage CPU tensors through host buffers of their own as CUDA tensors always are (NOTE
  /// [Gloo with CUDA tensors]), so that the CPU's tests run the staging path.
  bool stage_on_host = false;
};

/// A pending asynchronous collective or transfer. wait() finishes it (and any post-processing).
class Work {
 public:
  Work() = default;
  /// Blocks until done or the group's timeout; throws on failure.
  void wait();
  bool valid() const { return impl_ != nullptr; }

  struct Impl;
  explicit Work(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

 private:
  std::shared_ptr<Impl> impl_;
};

/// One transfer of a batch_isend_irecv (group ranks).
struct P2POp {
  enum class Kind { kSend, kRecv };
  Kind kind = Kind::kSend;
  at::Tensor tensor;  ///< what is sent, or where it is received (in place)
  int peer = 0;
  int tag = 0;
};

class Group {
 public:
  /// Connects `world` ranks through `store`. *Collective* over all of them.
  static Group create(const Store& store, int rank, int world, GroupOptions options = {},
                      std::shared_ptr<CommStats> stats = nullptr);

  /// Splits this group: `partition` lists every rank of this group exactly once, in disjoint
  /// lists; each rank gets the group of the list it is in, ranked in list order. Every rank
  /// must pass the same partition. *Collective.* The new group shares this one's CommStats.
  Group split(const std::vector<std::vector<int>>& partition, const std::string& label) const;

  int rank() const;
  int size() const;
  const std::string& label() const;
  Backend backend() const;
  /// The device of the tensors this group moves and makes.
  Device device() const;
  /// Ranks of this group's members in the root group it was split from.
  const std::vector<int>& root_ranks() const;
  /// The byte counters of this rank, shared by every group it is in.
  CommStats& stats() const;
  /// The flight recorder of this rank (NOTE [Flight recorder]), shared by every group it is in.
  const std::shared_ptr<FlightRecorder>& flight() const;
  /// "tp[2/4 of 4,5,6,7] gloo".
  std::string str() const;

  /// In-place all-reduce. *Collective.*
  void all_reduce(at::Tensor& tensor, ReduceOp op = ReduceOp::kSum) const;
  /// Starts an in-place all-reduce; the result is in `tensor` after Work::wait(). *Collective.*
  Work all_reduce_async(at::Tensor& tensor, ReduceOp op = ReduceOp::kSum) const;

  /// Concatenates every rank's `local` along `dim`. `sizes` gives each rank's extent along `dim`
  /// (uneven allowed, zeros too); empty means ranks exchange their sizes first. The other dims
  /// must agree. On a size-1 group returns `local` itself. *Collective.*
  at::Tensor all_gather(const at::Tensor& local, int64_t dim = 0,
                        std::vector<int64_t> sizes = {}) const;

  /// Starts an all-gather of equal 1-D pieces: every rank's `piece` lands in `out` (size() times
  /// as long) in rank order after Work::wait(). Neither may be touched until then. *Collective.*
  Work all_gather_async(const at::Tensor& piece, at::Tensor& out) const;

  /// Reduces `input` over the group and returns this rank's piece of it along `dim`; `sizes` are
  /// the pieces' extents (empty: torch.chunk sizes). Same bytes on the wire as a real
  /// reduce-scatter (Gloo has none: it is an all-to-all of pieces and a local reduction).
  /// *Collective.*
  at::Tensor reduce_scatter(const at::Tensor& input, int64_t dim = 0, ReduceOp op = ReduceOp::kSum,
                            std::vector<int64_t> sizes = {}) const;

  /// Sends inputs[r] to rank r and returns outputs[r] received from rank r, whose shapes the
  /// caller knows (`output_shapes`). Dtypes must agree. *Collective.*
  std::vector<at::Tensor> all_to_all(const std::vector<at::Tensor>& inputs,
                                     const std::vector<std::vector<int64_t>>& output_shapes) const;

  /// Copies `tensor` of group rank `root` into `tensor` on every rank. *Collective.*
  void broadcast(at::Tensor& tensor, int root) const;

  /// Point-to-point (group ranks): the peer must post the matching call with the same tag.
  /// The non-blocking forms return at once; `tensor` must stay untouched until Work::wait(),
  /// which waits at most the group's timeout. Bytes count when wait() completes.
  Work isend(const at::Tensor& tensor, int dst, int tag = 0) const;
  Work irecv(at::Tensor& tensor, int src, int tag = 0) const;
  /// Posts every transfer before any completes (no deadlock whatever the order); one Work each,
  /// in the order of `ops`.
  std::vector<Work> batch_isend_irecv(const std::vector<P2POp>& ops) const;
  /// Blocking forms of isend and irecv.
  void send(const at::Tensor& tensor, int dst, int tag = 0) const;
  void recv(at::Tensor& tensor, int src, int tag = 0) const;
  /// Sends `out` to `dst` and receives `in` from `src` at once (a ring shift without deadlock).
  void send_recv(const at::Tensor& out, int dst, at::Tensor& in, int src, int tag = 0) const;

  /// Waits until every rank arrives. *Collective.*
  void barrier() const;

  struct Impl;

 private:
  explicit Group(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<Impl> impl_;
};

}  // namespace vescale::comm
