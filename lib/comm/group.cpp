#include "comm/group.h"

#include <ATen/ATen.h>

#include <atomic>
#include <cstdlib>
#include <functional>
#include <numeric>

#include "comm/c10d_compat.h"
#include "comm/nccl_backend.h"
#include "core/chunking.h"
#include "core/error.h"
#include "core/heartbeat.h"
#include "core/logging.h"

namespace vescale::comm {

using detail::BackendBase;

// ---------------------------------------------------------------------------------------------
// Backends
// ---------------------------------------------------------------------------------------------

const char* backend_name(Backend backend) {
  switch (backend) {
    case Backend::kAuto:
      return "auto";
    case Backend::kGloo:
      return "gloo";
    case Backend::kNccl:
      return "nccl";
  }
  return "?";
}

Backend parse_backend(const std::string& text) {
  if (text == "auto") return Backend::kAuto;
  if (text == "gloo") return Backend::kGloo;
  if (text == "nccl") return Backend::kNccl;
  throw UserError(fmt::format("[comm] unknown backend '{}': use auto, gloo or nccl", text));
}

Backend resolve_backend(Backend requested, Device device) {
  if (requested == Backend::kAuto) return device.is_cuda() ? Backend::kNccl : Backend::kGloo;
  if (requested == Backend::kNccl) {
    VS_USER_CHECK(nccl_available(),
                  "[comm] comm.backend = 'nccl', but {}: use comm.backend = "
                  "'gloo' or 'auto'",
                  nccl_version().empty()
                      ? "this build has no NCCL (NCCL needs a CUDA LibTorch and a GPU)"
                      : fmt::format("this process sees no GPU (NCCL {} is built in; it needs one)",
                                    nccl_version()));
    VS_USER_CHECK(device.is_cuda(),
                  "[comm] comm.backend = 'nccl' moves CUDA tensors, but this rank computes on {}: "
                  "set training.device = 'cuda' (or 'auto'), or comm.backend = 'auto'",
                  device.str());
  }
  VS_USER_CHECK(requested != Backend::kGloo || !device.is_cuda(),
                "[comm] comm.backend = 'gloo' moves CPU tensors only, but this rank computes on "
                "{}: use comm.backend = 'nccl' or 'auto', or training.device = 'cpu'",
                device.str());
  return requested;
}

namespace {

std::shared_ptr<::gloo::transport::Device> gloo_device(const std::string& host) {
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname) {
    return ::c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
  }
  if (!host.empty()) return ::c10d::ProcessGroupGloo::createDeviceForHostname(host);
  return ::c10d::ProcessGroupGloo::createDefaultDevice();
}

c10::intrusive_ptr<BackendBase> make_backend(const c10::intrusive_ptr<::c10d::Store>& store,
                                             int rank, int size, const GroupOptions& options,
                                             Backend backend) {
  if (backend == Backend::kGloo) {
    auto gloo_options = ::c10d::ProcessGroupGloo::Options::create(options.timeout);
    gloo_options->devices.push_back(gloo_device(options.gloo_host));
    return c10::make_intrusive<::c10d::ProcessGroupGloo>(store, rank, size, gloo_options);
  }
  return detail::make_nccl_process_group(store, rank, size, options.timeout);
}

int64_t product(c10::IntArrayRef sizes) {
  return std::accumulate(sizes.begin(), sizes.end(), int64_t{1}, std::multiplies<int64_t>());
}

bool is_timeout(const std::string& message) {
  std::string lower = message;
  std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
  return lower.find("timed out") != std::string::npos || lower.find("timeout") != std::string::npos;
}

}  // namespace

namespace detail {
namespace {
thread_local int t_injected_connect_failures = 0;
}  // namespace

void inject_connect_failures(int count) {
  t_injected_connect_failures = count;
}

bool take_injected_connect_failure() {
  if (t_injected_connect_failures == 0) return false;
  --t_injected_connect_failures;
  return true;
}
}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Group state
// ---------------------------------------------------------------------------------------------

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
    std::string message = fmt::format("[comm] {} over {} failed (timeout {}s): {}", what,
                                      describe(), options.timeout.count() / 1000.0, reason);
    if (is_timeout(reason)) throw TimeoutError(message);
    throw Error(message);
  }

  /// A tensor as the backend can carry it, contiguous. Gloo has no bfloat16: such tensors
  /// travel as float32 (byte counts stay those of the bf16 tensor, what NCCL sends).
  at::Tensor on_wire(const at::Tensor& t) const {
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
    wait(guarded(what, [&] { return pg->alltoall_base(out, in, out_counts, in_counts, opts); }),
         what);
    if (!out.is_same(output)) output.copy_(out);
  }

  // NOTE [Connect retry]
  // Gloo as LibTorch 1.13 ships it gives every pair its own listening socket, and now and then a
  // pair reads end-of-file while the group connects: "Connection closed by peer" on one rank,
  // while its peers report success and go on with a group that is broken (seen twice in 120 runs
  // of a test that connects 6 groups of 2-4 threads on loopback, and once on CI). A group must
  // be whole on every member or on none, so after each attempt the members agree through the
  // store: each adds its outcome to one counter (1 for a failure worth retrying, a large number
  // for a timeout or our own error) and waits until all have added. Any failure makes every
  // member drop its backend and connect again under a fresh prefix; a timeout, our own error or
  // a third failure ends the connect on every member, each with the reason it knows. The
  // agreement also keeps members from starting the next group while one still connects this one;
  // with it, 650 runs of that test saw no failure at all.
  void connect() {
    constexpr int kAttempts = 3;
    constexpr int64_t kFatal = int64_t{1} << 32;
    for (int attempt = 1;; ++attempt) {
      const std::string attempt_prefix =
          attempt == 1 ? prefix : fmt::format("{}/attempt{}", prefix, attempt);
      auto store = c10::make_intrusive<::c10d::PrefixStore>(attempt_prefix, root_store);
      std::string error;
      std::exception_ptr own_error;  // ours, rethrown as it is once the others know
      try {
        pg = make_backend(store, rank, size, options, backend);
        if (detail::take_injected_connect_failure())
          throw std::runtime_error("injected for a test");
      } catch (const vescale::Error& e) {
        error = e.what();
        own_error = std::current_exception();
      } catch (const c10::Error& e) {
        error = e.what_without_backtrace();
      } catch (const std::exception& e) {
        error = e.what();
      }
      const bool fatal = own_error != nullptr || is_timeout(error);
      const int64_t outcome = error.empty() ? 0 : fatal ? kFatal : 1;
      const int64_t sum = guarded("connect", [&] {
        store->add("connect/outcome", outcome);
        store->set("connect/arrived/" + std::to_string(rank), std::vector<uint8_t>{1});
        // A member that timed out does not wait for the others: they may never come.
        if (!fatal) {
          std::vector<std::string> keys;
          for (int r = 0; r < size; ++r)
            keys.push_back("connect/arrived/" + std::to_string(r));
          store->wait(keys, options.timeout);
        }
        return store->add("connect/outcome", 0);
      });
      if (sum == 0) return;
      pg.reset();
      const int64_t failed = sum % kFatal;
      const bool give_up = fatal || sum >= kFatal || attempt == kAttempts;
      if (give_up) {
        if (own_error) std::rethrow_exception(own_error);
        fail("connect",
             !error.empty()
                 ? error
                 : fmt::format(
                       "{} other member(s) failed to connect{}", failed + sum / kFatal,
                       attempt > 1 ? fmt::format(" ({} attempts)", attempt) : std::string()));
      }
      spdlog::warn("[comm] connect over {}: {}; connecting again (attempt {} of {})", describe(),
                   error.empty() ? fmt::format("{} other member(s) failed", failed) : error,
                   attempt + 1, kAttempts);
    }
  }

  void wait(const c10::intrusive_ptr<::c10d::Work>& work, const char* what) const {
    heartbeat::WaitScope waiting;  // NOTE [Heartbeat]
    guarded(what, [&] { return work->wait(options.timeout); });
  }
};

struct Work::Impl {
  std::shared_ptr<const Group::Impl> keep_alive;
  c10::intrusive_ptr<::c10d::Work> work;
  std::function<void()> finish;
  const char* what = "";
  bool done = false;
};

void Work::wait() {
  if (!impl_ || impl_->done) return;
  impl_->keep_alive->wait(impl_->work, impl_->what);
  if (impl_->finish) impl_->finish();
  impl_->done = true;
}

// ---------------------------------------------------------------------------------------------
// Creation
// ---------------------------------------------------------------------------------------------

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
  if (impl->size > 1) impl->connect();
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
std::chrono::milliseconds Group::timeout() const {
  return impl_->options.timeout;
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
std::string Group::str() const {
  return impl_->describe();
}

// ---------------------------------------------------------------------------------------------
// Collectives
// ---------------------------------------------------------------------------------------------

void Group::all_reduce(at::Tensor& tensor, ReduceOp op) const {
  all_reduce_async(tensor, op).wait();
}

Work Group::all_reduce_async(at::Tensor& tensor, ReduceOp op) const {
  const int n = impl_->size;
  VS_CHECK(op != ReduceOp::kAvg || at::isFloatingType(tensor.scalar_type()),
           "[comm] all_reduce avg needs a floating tensor, got {}",
           c10::toString(tensor.scalar_type()));
  impl_->check_device(tensor, "all_reduce");
  if (n == 1) return Work();
  at::Tensor buffer = impl_->on_wire(tensor);
  std::vector<at::Tensor> tensors{buffer};
  ::c10d::AllreduceOptions opts;
  opts.reduceOp = op == ReduceOp::kMax ? ::c10d::ReduceOp::MAX : ::c10d::ReduceOp::SUM;
  opts.timeout = impl_->options.timeout;
  auto work = std::make_shared<Work::Impl>();
  work->keep_alive = impl_;
  work->what = "all_reduce";
  work->work = impl_->guarded("all_reduce", [&] { return impl_->pg->allreduce(tensors, opts); });
  work->finish = [buffer, tensor, op, n]() mutable {
    if (op == ReduceOp::kAvg) buffer.div_(n);
    if (!buffer.is_same(tensor)) tensor.copy_(buffer);
  };
  impl_->record(CommKind::kAllReduce, 2 * (n - 1) * static_cast<int64_t>(tensor.nbytes()) / n);
  return Work(std::move(work));
}

at::Tensor Group::all_gather(const at::Tensor& local, int64_t dim,
                             std::vector<int64_t> sizes) const {
  const int n = impl_->size;
  impl_->check_device(local, "all_gather");
  if (n == 1) return local;
  VS_CHECK(local.dim() > 0, "[comm] all_gather needs a tensor with at least one dim");
  dim = c10::maybe_wrap_dim(dim, local.dim());
  if (sizes.empty()) {
    at::Tensor mine = at::full({1}, local.size(dim), at::dtype(at::kLong).device(device()));
    at::Tensor all = all_gather(mine, 0, std::vector<int64_t>(n, 1)).cpu();
    sizes.assign(all.data_ptr<int64_t>(), all.data_ptr<int64_t>() + n);
  }
  VS_CHECK(static_cast<int>(sizes.size()) == n && sizes[impl_->rank] == local.size(dim),
           "[comm] all_gather over {}: sizes {} do not match the group or the local extent {}",
           impl_->describe(), fmt::join(sizes, ","), local.size(dim));

  at::Tensor x = local.movedim(dim, 0).contiguous();
  std::vector<int64_t> shape = x.sizes().vec();
  const int64_t inner = product(x.sizes().slice(1));
  const int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
  const bool even =
      std::all_of(sizes.begin(), sizes.end(), [&](int64_t s) { return s == sizes[0]; });
  shape[0] = total;

  at::Tensor out = at::empty(shape, x.options());
  if (even && total > 0 && inner > 0) {
    // Equal pieces: c10d's all-gather straight into the result (it counts the bytes).
    at::Tensor flat = out.view({-1});
    all_gather_async(x.view({-1}), flat).wait();
    return out.movedim(0, dim);
  }
  if (total > 0 && inner > 0) {
    // Uneven: every rank sends its own piece to every peer (an all-to-all whose input is the
    // local piece repeated), which is exactly the bytes of an all-gather.
    std::vector<int64_t> in_counts(n, x.numel());
    std::vector<int64_t> out_counts(n);
    for (int r = 0; r < n; ++r)
      out_counts[r] = sizes[r] * inner;
    at::Tensor input = x.reshape({-1}).repeat({n});
    at::Tensor output = out.view({-1});
    impl_->alltoall(output, input, out_counts, in_counts, "all_gather");
  }
  impl_->record(CommKind::kAllGather, (n - 1) * static_cast<int64_t>(local.nbytes()));
  return out.movedim(0, dim);
}

Work Group::all_gather_async(const at::Tensor& piece, at::Tensor& out) const {
  const int n = impl_->size;
  impl_->check_device(piece, "all_gather");
  VS_CHECK(piece.dim() == 1 && piece.is_contiguous() && out.dim() == 1 && out.is_contiguous() &&
               out.numel() == n * piece.numel() && out.scalar_type() == piece.scalar_type(),
           "[comm] all_gather_async over {}: a 1-D piece of {} and an output of {} elements",
           impl_->describe(), piece.numel(), out.numel());
  if (n == 1 || piece.numel() == 0) {
    out.copy_(piece);
    return Work();
  }
  const at::Tensor wire = impl_->on_wire(piece);
  at::Tensor received = wire.is_same(piece) ? out : at::empty(out.sizes(), wire.options());
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int r = 0; r < n; ++r)
    outputs[0].push_back(received.narrow(0, r * piece.numel(), piece.numel()));
  std::vector<at::Tensor> inputs{wire};
  ::c10d::AllgatherOptions opts;
  opts.timeout = impl_->options.timeout;
  auto work = std::make_shared<Work::Impl>();
  work->keep_alive = impl_;
  work->what = "all_gather";
  work->work =
      impl_->guarded("all_gather", [&] { return impl_->pg->allgather(outputs, inputs, opts); });
  // The views and the input must outlive the collective.
  work->finish = [outputs, inputs, received, out]() mutable {
    if (!received.is_same(out)) out.copy_(received);
  };
  impl_->record(CommKind::kAllGather, (n - 1) * static_cast<int64_t>(piece.nbytes()));
  return Work(std::move(work));
}

at::Tensor Group::reduce_scatter(const at::Tensor& input, int64_t dim, ReduceOp op,
                                 std::vector<int64_t> sizes) const {
  const int n = impl_->size;
  VS_CHECK(op != ReduceOp::kAvg || at::isFloatingType(input.scalar_type()),
           "[comm] reduce_scatter avg needs a floating tensor, got {}",
           c10::toString(input.scalar_type()));
  impl_->check_device(input, "reduce_scatter");
  if (n == 1) return input;
  VS_CHECK(input.dim() > 0, "[comm] reduce_scatter needs a tensor with at least one dim");
  dim = c10::maybe_wrap_dim(dim, input.dim());
  if (sizes.empty()) sizes = chunk_sizes(input.size(dim), n);
  VS_CHECK(static_cast<int>(sizes.size()) == n &&
               std::accumulate(sizes.begin(), sizes.end(), int64_t{0}) == input.size(dim),
           "[comm] reduce_scatter over {}: pieces {} do not split extent {} into {}",
           impl_->describe(), fmt::join(sizes, ","), input.size(dim), n);

  at::Tensor x = input.movedim(dim, 0).contiguous();
  std::vector<int64_t> shape = x.sizes().vec();
  const int64_t inner = product(x.sizes().slice(1));
  const int64_t own = sizes[impl_->rank] * inner;
  shape[0] = sizes[impl_->rank];

  at::Tensor reduced;
  if (x.numel() == 0) {
    reduced = at::empty(shape, x.options());
  } else {
    // NOTE [Reduce-scatter on Gloo]: piece r goes to rank r (all-to-all), then each rank reduces
    // the n copies of its piece in rank order. Bytes on the wire: T - own, as a real one.
    std::vector<int64_t> in_counts(n), out_counts(n, own);
    for (int r = 0; r < n; ++r)
      in_counts[r] = sizes[r] * inner;
    at::Tensor flat = x.reshape({-1});
    at::Tensor output = at::empty({n * own}, x.options());
    impl_->alltoall(output, flat, out_counts, in_counts, "reduce_scatter");
    at::Tensor pieces = output.view({n, own});
    reduced = op == ReduceOp::kMax ? std::get<0>(pieces.max(0)) : pieces.sum(0);
    if (op == ReduceOp::kAvg) reduced.div_(n);
    reduced = reduced.view(shape);
  }
  impl_->record(CommKind::kReduceScatter, static_cast<int64_t>(input.nbytes()) -
                                              own * static_cast<int64_t>(input.element_size()));
  return reduced.movedim(0, dim);
}

std::vector<at::Tensor> Group::all_to_all(
    const std::vector<at::Tensor>& inputs,
    const std::vector<std::vector<int64_t>>& output_shapes) const {
  const int n = impl_->size;
  VS_CHECK(static_cast<int>(inputs.size()) == n && static_cast<int>(output_shapes.size()) == n,
           "[comm] all_to_all over {}: need one input and one output shape per rank, got {} and {}",
           impl_->describe(), inputs.size(), output_shapes.size());
  for (const at::Tensor& input : inputs)
    impl_->check_device(input, "all_to_all");
  if (n == 1) {
    VS_CHECK(inputs[0].sizes().vec() == output_shapes[0],
             "[comm] all_to_all on one rank: output shape must equal the input's");
    return {inputs[0]};
  }
  const auto options = inputs[0].options();
  std::vector<int64_t> in_counts(n), out_counts(n);
  std::vector<at::Tensor> flats;
  for (int r = 0; r < n; ++r) {
    VS_CHECK(inputs[r].scalar_type() == inputs[0].scalar_type(),
             "[comm] all_to_all: inputs must share one dtype");
    in_counts[r] = inputs[r].numel();
    out_counts[r] = product(output_shapes[r]);
    flats.push_back(inputs[r].reshape({-1}));
  }
  at::Tensor input = at::cat(flats);
  at::Tensor output =
      at::empty({std::accumulate(out_counts.begin(), out_counts.end(), int64_t{0})}, options);
  impl_->alltoall(output, input, out_counts, in_counts, "all_to_all");
  std::vector<at::Tensor> outputs;
  int64_t offset = 0;
  for (int r = 0; r < n; ++r) {
    outputs.push_back(output.narrow(0, offset, out_counts[r]).view(output_shapes[r]));
    offset += out_counts[r];
  }
  impl_->record(CommKind::kAllToAll, (input.numel() - in_counts[impl_->rank]) *
                                         static_cast<int64_t>(input.element_size()));
  return outputs;
}

void Group::broadcast(at::Tensor& tensor, int root) const {
  const int n = impl_->size;
  VS_CHECK(root >= 0 && root < n, "[comm] broadcast over {}: root {} out of range",
           impl_->describe(), root);
  impl_->check_device(tensor, "broadcast");
  if (n == 1) return;
  at::Tensor buffer = impl_->on_wire(tensor);
  std::vector<at::Tensor> tensors{buffer};
  ::c10d::BroadcastOptions opts;
  opts.rootRank = root;
  opts.timeout = impl_->options.timeout;
  impl_->wait(impl_->guarded("broadcast", [&] { return impl_->pg->broadcast(tensors, opts); }),
              "broadcast");
  if (!buffer.is_same(tensor)) tensor.copy_(buffer);
  impl_->record(CommKind::kBroadcast,
                impl_->rank == root ? (n - 1) * static_cast<int64_t>(tensor.nbytes()) : 0);
}

// ---------------------------------------------------------------------------------------------
// Point-to-point
// ---------------------------------------------------------------------------------------------

namespace {

/// Posts one transfer; its Work copies a received non-contiguous tensor back and counts the bytes
/// (NOTE [Communication volume]) once the transfer is done.
Work post(const std::shared_ptr<const Group::Impl>& group, const P2POp& op) {
  const bool sending = op.kind == P2POp::Kind::kSend;
  const char* what = sending ? "send" : "recv";
  VS_CHECK(op.peer >= 0 && op.peer < group->size && op.peer != group->rank,
           "[comm] {} over {}: bad peer {}", what, group->describe(), op.peer);
  group->check_device(op.tensor, what);
  at::Tensor buffer = group->on_wire(op.tensor);
  std::vector<at::Tensor> tensors{buffer};
  auto work = std::make_shared<Work::Impl>();
  work->keep_alive = group;
  work->what = what;
  work->work = group->guarded(what, [&] {
    return sending ? group->pg->send(tensors, op.peer, op.tag)
                   : group->pg->recv(tensors, op.peer, op.tag);
  });
  const CommKind kind = sending ? CommKind::kSend : CommKind::kRecv;
  const int64_t bytes = sending ? static_cast<int64_t>(op.tensor.nbytes()) : 0;
  work->finish = [group, buffer, target = op.tensor, kind, bytes]() mutable {
    if (kind == CommKind::kRecv && !buffer.is_same(target)) target.copy_(buffer);
    group->record(kind, bytes);
  };
  return Work(std::move(work));
}

}  // namespace

Work Group::isend(const at::Tensor& tensor, int dst, int tag) const {
  return post(impl_, {P2POp::Kind::kSend, tensor, dst, tag});
}

Work Group::irecv(at::Tensor& tensor, int src, int tag) const {
  return post(impl_, {P2POp::Kind::kRecv, tensor, src, tag});
}

std::vector<Work> Group::batch_isend_irecv(const std::vector<P2POp>& ops) const {
  // Gloo posts each transfer without blocking, so any order of posts is safe. NCCL needs them in
  // one ncclGroupStart/End (c10d's coalescing API, which changes across LibTorch 2.x releases) to
  // be safe when a pair both sends and receives; that is not done yet (README, Limits).
  std::vector<Work> works;
  works.reserve(ops.size());
  for (const P2POp& op : ops)
    works.push_back(post(impl_, op));
  return works;
}

void Group::send(const at::Tensor& tensor, int dst, int tag) const {
  isend(tensor, dst, tag).wait();
}

void Group::recv(at::Tensor& tensor, int src, int tag) const {
  irecv(tensor, src, tag).wait();
}

void Group::send_recv(const at::Tensor& out, int dst, at::Tensor& in, int src, int tag) const {
  for (Work& work :
       batch_isend_irecv({{P2POp::Kind::kSend, out, dst, tag}, {P2POp::Kind::kRecv, in, src, tag}}))
    work.wait();
}

void Group::barrier() const {
  if (impl_->size == 1) return;
  ::c10d::BarrierOptions opts;
  opts.timeout = impl_->options.timeout;
  impl_->wait(impl_->guarded("barrier", [&] { return impl_->pg->barrier(opts); }), "barrier");
  impl_->record(CommKind::kBarrier, 0);
}

}  // namespace vescale::comm
