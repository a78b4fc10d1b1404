#include <ATen/ATen.h>

#include <numeric>

#include "comm/group_impl.h"
#include "core/chunking.h"

namespace vescale::comm {
namespace {

int64_t product(c10::IntArrayRef sizes) {
  return std::accumulate(sizes.begin(), sizes.end(), int64_t{1}, std::multiplies<int64_t>());
}

}  // namespace

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
  work->posted = impl_->post("all_reduce", false, static_cast<int64_t>(tensor.nbytes()),
                             [&] { return impl_->pg->allreduce(tensors, opts); });
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
  work->posted = impl_->post("all_gather", false, static_cast<int64_t>(piece.nbytes()),
                             [&] { return impl_->pg->allgather(outputs, inputs, opts); });
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
  impl_->wait(impl_->post("broadcast", false, static_cast<int64_t>(tensor.nbytes()),
                          [&] { return impl_->pg->broadcast(tensors, opts); }),
              "broadcast");
  if (!buffer.is_same(tensor)) tensor.copy_(buffer);
  impl_->record(CommKind::kBroadcast,
                impl_->rank == root ? (n - 1) * static_cast<int64_t>(tensor.nbytes()) : 0);
}

void Group::barrier() const {
  if (impl_->size == 1) return;
  ::c10d::BarrierOptions opts;
  opts.timeout = impl_->options.timeout;
  impl_->wait(impl_->post("barrier", false, 0, [&] { return impl_->pg->barrier(opts); }),
              "barrier");
  impl_->record(CommKind::kBarrier, 0);
}

}  // namespace vescale::comm
