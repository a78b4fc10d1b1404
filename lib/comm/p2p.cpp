#include "comm/group_impl.h"

namespace vescale::comm {

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
  work->posted = group->post(
      what, true, static_cast<int64_t>(op.tensor.nbytes()),
      [&] {
        return sending ? group->pg->send(tensors, op.peer, op.tag)
                       : group->pg->recv(tensors, op.peer, op.tag);
      },
      op.peer);
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
  // be safe when a pair both sends and receives; that is not done yet (docs/limits.md).
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

}  // namespace vescale::comm
