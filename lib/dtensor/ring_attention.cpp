#include "dtensor/ring_attention.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/csrc/autograd/saved_variable.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/autograd_node.h"
#include "core/error.h"

namespace vescale {
namespace {

// Tags of the ring's transfers, by what moves; the step is added.
constexpr int kKeysValuesTag = 0x5200;
constexpr int kGradientsTag = 0x5300;

/// How a query chunk meets a key chunk under the causal mask.
enum class Meet { kWhole, kDiagonal, kNone };

Meet meet(int64_t query_chunk, int64_t key_chunk) {
  if (key_chunk < query_chunk) return Meet::kWhole;
  return key_chunk == query_chunk ? Meet::kDiagonal : Meet::kNone;
}

/// The dtype sums are kept in: float32 for bf16 (and other low precision) inputs.
at::ScalarType accumulation_dtype(at::ScalarType t) {
  return t == at::kDouble ? at::kDouble : at::kFloat;
}

/// scale q k^T over one query chunk and one key chunk, with the causal mask on a diagonal block.
at::Tensor block_scores(const at::Tensor& q, const at::Tensor& k, Meet how, double scale) {
  at::Tensor s = at::matmul(q, k.transpose(-2, -1)).mul_(scale);
  if (how == Meet::kDiagonal) {
    const int64_t c = q.size(-2);
    const at::Tensor future = at::ones({c, c}, q.options().dtype(at::kBool)).triu(1);
    s.masked_fill_(future, -std::numeric_limits<double>::infinity());
  }
  return s;
}

/// A rank's chunk `i` (0 or 1) of a [B, H, T_local, D] or [B, H, T_local] tensor.
at::Tensor chunk_of(const at::Tensor& x, int64_t i) {
  const int64_t c = x.size(2) / 2;
  return x.slice(2, i * c, (i + 1) * c);
}

/// Starts sending `out` to the next rank of the ring and receiving `in` from the previous one.
std::vector<comm::Work> shift(const comm::Group& ring, const at::Tensor& out, at::Tensor& in,
                              int tag) {
  const int next = (ring.rank() + 1) % ring.size();
  const int prev = (ring.rank() + ring.size() - 1) % ring.size();
  return ring.batch_isend_irecv(
      {{comm::P2POp::Kind::kSend, out, next, tag}, {comm::P2POp::Kind::kRecv, in, prev, tag}});
}

void wait_all(std::vector<comm::Work>& works) {
  for (comm::Work& w : works)
    w.wait();
  works.clear();
}

/// The chunks of the rank whose keys and values rank `rank` holds at ring step `step`.
std::array<int64_t, 2> held_chunks(const comm::Group& ring, int step) {
  return ring_chunks((ring.rank() - step + ring.size()) % ring.size(), ring.size());
}

/// A block of a ring step: this rank's query chunk i meets the held key chunk j, as `how` says.
struct RingBlock {
  int64_t i, j;
  Meet how;
};

/// Walks this rank's keys and values around the ring (NOTE [Ring attention]): at each step,
/// visit(step, keys, values, blocks) with the keys and values held then (in `acc`) and the
/// blocks they make with this rank's queries, while the next step's are in flight.
template <typename Visit>
void around_the_ring(const comm::Group& ring, const at::Tensor& k, const at::Tensor& v,
                     at::ScalarType acc, const Visit& visit) {
  const std::array<int64_t, 2> mine = ring_chunks(ring.rank(), ring.size());
  at::Tensor kv = at::stack({k, v});
  for (int s = 0; s < ring.size(); ++s) {
    std::vector<comm::Work> works;
    at::Tensor next;
    if (s + 1 < ring.size()) {
      next = at::empty_like(kv);
      works = shift(ring, kv, next, kKeysValuesTag + s);
    }
    const std::array<int64_t, 2> held = held_chunks(ring, s);
    std::vector<RingBlock> blocks;
    for (int64_t i = 0; i < 2; ++i) {
      for (int64_t j = 0; j < 2; ++j) {
        const Meet how = meet(mine[i], held[j]);
        if (how != Meet::kNone) blocks.push_back({i, j, how});
      }
    }
    visit(s, kv[0].to(acc), kv[1].to(acc), blocks);
    wait_all(works);
    if (next.defined()) kv = next;
  }
}

struct Forward {
  at::Tensor out;  ///< [B, H, T_local, D], the accumulation dtype
  at::Tensor lse;  ///< [B, H, T_local]
};

/// NOTE [Ring attention], forward.
Forward ring_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                     const comm::Group& ring) {
  const at::ScalarType acc = accumulation_dtype(q.scalar_type());
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  const at::Tensor queries = q.to(acc);
  Forward f{at::zeros(q.sizes(), q.options().dtype(acc)),
            at::full({q.size(0), q.size(1), q.size(2)}, -std::numeric_limits<double>::infinity(),
                     q.options().dtype(acc))};
  around_the_ring(ring, k, v, acc,
                  [&](int, const at::Tensor& keys, const at::Tensor& values,
                      const std::vector<RingBlock>& blocks) {
                    for (const RingBlock& b : blocks) {
                      const at::Tensor scores =
                          block_scores(chunk_of(queries, b.i), chunk_of(keys, b.j), b.how, scale);
                      const at::Tensor max = std::get<0>(scores.max(-1, /*keepdim=*/true));
                      const at::Tensor probs = (scores - max).exp_();
                      const at::Tensor sum = probs.sum(-1, /*keepdim=*/true);
                      const at::Tensor out_b = at::matmul(probs, chunk_of(values, b.j)).div_(sum);
                      const at::Tensor lse_b = (max + sum.log()).squeeze(-1);
                      // The online softmax: merge the block into this chunk's running output.
                      at::Tensor out = chunk_of(f.out, b.i), lse = chunk_of(f.lse, b.i);
                      const at::Tensor merged = at::logaddexp(lse, lse_b);
                      out.mul_((lse - merged).exp().unsqueeze(-1))
                          .add_(out_b * (lse_b - merged).exp().unsqueeze(-1));
                      lse.copy_(merged);
                    }
                  });
  return f;
}

struct Gradients {
  at::Tensor dq, dk, dv;
};

/// NOTE [Ring attention], backward: the flash-attention backward per block, the keys and values
/// going around the ring with an accumulator of their gradients.
Gradients ring_backward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                        const Forward& f, const at::Tensor& grad_out, const comm::Group& ring) {
  const at::ScalarType acc = f.out.scalar_type();
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  const at::Tensor queries = q.to(acc), dout = grad_out.to(acc);
  const at::Tensor delta = (dout * f.out).sum(-1);  // rowsum(dO o O)
  at::Tensor dq = at::zeros_like(queries);
  at::Tensor own = at::zeros({2, k.size(0), k.size(1), k.size(2), k.size(3)},
                             k.options().dtype(acc));  // this rank's keys' and values' gradients
  at::Tensor travelling;  // the gradients of the keys and values held, from other ranks so far
  around_the_ring(
      ring, k, v, acc,
      [&](int s, const at::Tensor& keys, const at::Tensor& values,
          const std::vector<RingBlock>& blocks) {
        if (s == 1) travelling = at::zeros_like(own);  // starts at the first rank after the owner
        at::Tensor& dkv = s == 0 ? own : travelling;
        for (const RingBlock& b : blocks) {
          const at::Tensor q_i = chunk_of(queries, b.i), k_j = chunk_of(keys, b.j);
          const at::Tensor v_j = chunk_of(values, b.j), dout_i = chunk_of(dout, b.i);
          const at::Tensor probs =
              (block_scores(q_i, k_j, b.how, scale) - chunk_of(f.lse, b.i).unsqueeze(-1)).exp_();
          chunk_of(dkv[1], b.j).add_(at::matmul(probs.transpose(-2, -1), dout_i));
          const at::Tensor dscores = probs.mul_(
              at::matmul(dout_i, v_j.transpose(-2, -1)).sub_(chunk_of(delta, b.i).unsqueeze(-1)));
          chunk_of(dq, b.i).add_(at::matmul(dscores, k_j), scale);
          chunk_of(dkv[0], b.j).add_(at::matmul(dscores.transpose(-2, -1), q_i), scale);
        }
        if (s >= 1) {
          // On to the next rank, which holds these keys next (the owner, after the last step).
          at::Tensor arriving = at::empty_like(travelling);
          std::vector<comm::Work> works = shift(ring, travelling, arriving, kGradientsTag + s);
          wait_all(works);
          travelling = arriving;
        }
      });
  if (ring.size() > 1) own.add_(travelling);
  return {dq, own[0], own[1]};
}

/// The backward node of ring_causal_attention: edges q, k, v.
class RingAttentionBackward : public torch::autograd::Node {
 public:
  explicit RingAttentionBackward(comm::Group ring) : ring_(std::move(ring)) {}

  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    const at::Tensor q = q_.unpack(), k = k_.unpack(), v = v_.unpack();
    VS_CHECK(q.defined(), "[ring attention] backward a second time without retain_graph");
    const at::Tensor out = out_.unpack(self_of(*this));
    // Every rank of the ring runs this backward (the keys go around), so it runs even without
    // a gradient for this rank's output.
    const at::Tensor grad = grads[0].defined() ? grads[0] : at::zeros_like(out);
    const Forward f{out_acc_.defined() ? out_acc_ : out, lse_};
    const Gradients g = ring_backward(q, k, v, f, grad, ring_);
    return {g.dq.to(q.scalar_type()), g.dk.to(k.scalar_type()), g.dv.to(v.scalar_type())};
  }
  std::string name() const override { return "RingAttentionBackward"; }
  void release_variables() override {
    q_.reset_data();
    k_.reset_data();
    v_.reset_data();
    out_.reset_data();
    out_acc_ = at::Tensor();
    lse_ = at::Tensor();
  }

  void save(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& out,
            const Forward& f) {
    q_ = torch::autograd::SavedVariable(q, false);
    k_ = torch::autograd::SavedVariable(k, false);
    v_ = torch::autograd::SavedVariable(v, false);
    out_ = torch::autograd::SavedVariable(out, true);
    // The output in the accumulation dtype (the same tensor when that is the input's dtype).
    out_acc_ = f.out.scalar_type() == out.scalar_type() ? at::Tensor() : f.out;
    lse_ = f.lse;
  }

 private:
  comm::Group ring_;
  torch::autograd::SavedVariable q_, k_, v_, out_;
  at::Tensor out_acc_, lse_;
};

}  // namespace

std::array<int64_t, 2> ring_chunks(int rank, int size) {
  return {rank, 2 * static_cast<int64_t>(size) - 1 - rank};
}

at::Tensor ring_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                 const comm::Group& ring) {
  VS_CHECK(q.dim() == 4 && q.sizes() == k.sizes() && q.sizes() == v.sizes(),
           "[ring attention] q, k, v must share one [B, H, T, D] shape");
  VS_CHECK(q.size(2) % 2 == 0, "[ring attention] a rank's {} tokens are not two equal chunks",
           q.size(2));
  Forward f;
  {
    torch::autograd::AutoGradMode no_grad(false);
    f = ring_forward(q, k, v, ring);
  }
  at::Tensor out = f.out.scalar_type() == q.scalar_type() ? f.out : f.out.to(q.scalar_type());
  const bool track = torch::autograd::GradMode::is_enabled() &&
                     (q.requires_grad() || k.requires_grad() || v.requires_grad());
  if (!track) return out;
  auto node = make_node<RingAttentionBackward>(ring);
  node->set_next_edges(torch::autograd::collect_next_edges(q, k, v));
  torch::autograd::set_history(out, node);
  node->save(q, k, v, out, f);
  return out;
}

}  // namespace vescale
