// Ring attention (NOTE [Ring attention]) on threads-as-ranks, float64: each rank's output and
// the gradients of its q, k, v chunks equal those of the explicit causal attention over the
// whole sequence, for rings of 1, 2, 3 and 4 ranks; the bytes each rank sends are the ring's
// analytic volume; bf16 inputs accumulate in float32.
#include "dtensor/ring_attention.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <mutex>

#include "dtensor/context_parallel.h"
#include "kernels/local_kernels.h"
#include "support/run_ranks.h"
#include "support/tensors.h"

namespace vescale {
namespace {

/// This rank's two chunks of x [B, H, T, D] along T, concatenated.
at::Tensor my_chunks(const at::Tensor& x, int rank, int size) {
  return sequence_part(x, 2, rank, size);
}

struct Reference {
  at::Tensor q, k, v, dout, out, dq, dk, dv;
};

Reference reference(int64_t t, at::ScalarType dtype) {
  at::manual_seed(7);
  const auto options = at::TensorOptions(at::kDouble);
  Reference r;
  // Rounded to `dtype`: the reference computes in float64 from the same values.
  r.q = at::randn({2, 3, t, 8}, options).to(dtype);
  r.k = at::randn({2, 3, t, 8}, options).to(dtype);
  r.v = at::randn({2, 3, t, 8}, options).to(dtype);
  r.dout = at::randn({2, 3, t, 8}, options).to(dtype);
  // Copies: the chunks ranks take of r.q, r.k, r.v must be leaves of their own.
  const at::Tensor q = r.q.to(at::kDouble).clone().requires_grad_();
  const at::Tensor k = r.k.to(at::kDouble).clone().requires_grad_();
  const at::Tensor v = r.v.to(at::kDouble).clone().requires_grad_();
  r.out = local::causal_attention(q, k, v);
  r.out.backward(r.dout.to(at::kDouble));
  r.out = r.out.detach();
  r.dq = q.grad();
  r.dk = k.grad();
  r.dv = v.grad();
  return r;
}

/// The worst |difference| over ranks from the reference of outputs and gradients.
double ring_error(int ranks, const Reference& ref) {
  std::mutex mu;
  double worst = 0;
  testing::run_ranks(ranks, [&](const comm::Group& ring) {
    const int r = ring.rank();
    const at::Tensor q = my_chunks(ref.q, r, ranks).requires_grad_();
    const at::Tensor k = my_chunks(ref.k, r, ranks).requires_grad_();
    const at::Tensor v = my_chunks(ref.v, r, ranks).requires_grad_();
    const at::Tensor out = ring_causal_attention(q, k, v, ring);
    EXPECT_EQ(out.scalar_type(), q.scalar_type());
    out.backward(my_chunks(ref.dout, r, ranks));
    double w = 0;
    for (const auto& [mine, whole] : std::vector<std::pair<at::Tensor, at::Tensor>>{
             {out, ref.out}, {q.grad(), ref.dq}, {k.grad(), ref.dk}, {v.grad(), ref.dv}}) {
      const at::Tensor expected = my_chunks(whole, r, ranks);
      w = std::max(w, (mine.to(at::kDouble) - expected).abs().max().item<double>());
    }
    std::lock_guard<std::mutex> lock(mu);
    worst = std::max(worst, w);
  });
  return worst;
}

TEST(RingAttention, MatchesAttentionOverTheWholeSequence) {
  for (int ranks : {1, 2, 3, 4}) {
    const Reference ref = reference(8 * 2 * ranks, at::kDouble);
    const double error = ring_error(ranks, ref);
    std::printf("ring of %d, T = %lld, float64: worst |difference| of output, dq, dk, dv = %.3g\n",
                ranks, static_cast<long long>(ref.q.size(2)), error);
    EXPECT_LE(error, 1e-12) << ranks << " ranks";
  }
}

TEST(RingAttention, Bfloat16AccumulatesInFloat32) {
  const Reference ref = reference(32, at::kBFloat16);
  const double error = ring_error(2, ref);
  std::printf("ring of 2, bfloat16: worst |difference| from float64 = %.3g\n", error);
  EXPECT_LE(error, 0.05);
}

TEST(RingAttention, SendsTheRingsVolume) {
  for (int ranks : {2, 4}) {
    const Reference ref = reference(8 * 2 * ranks, at::kDouble);
    testing::run_ranks(ranks, [&](const comm::Group& ring) {
      const at::Tensor q = my_chunks(ref.q, ring.rank(), ranks).requires_grad_();
      const at::Tensor k = my_chunks(ref.k, ring.rank(), ranks).requires_grad_();
      const at::Tensor v = my_chunks(ref.v, ring.rank(), ranks).requires_grad_();
      const int64_t chunk_pair = 2 * k.numel() * 8;  // keys and values, float64
      const int64_t before = ring.stats().bytes(ring.label());
      const at::Tensor out = ring_causal_attention(q, k, v, ring);
      const int64_t forward = ring.stats().bytes(ring.label()) - before;
      out.backward(my_chunks(ref.dout, ring.rank(), ranks));
      const int64_t backward = ring.stats().bytes(ring.label()) - before - forward;
      // Forward: the key/value pair P - 1 times; backward: it and its gradients P - 1 times.
      EXPECT_EQ(forward, (ranks - 1) * chunk_pair);
      EXPECT_EQ(backward, 2 * (ranks - 1) * chunk_pair);
      if (ring.rank() == 0)
        std::printf("ring of %d: sent %lld B forward, %lld B backward; key/value pair %lld B\n",
                    ranks, static_cast<long long>(forward), static_cast<long long>(backward),
                    static_cast<long long>(chunk_pair));
    });
  }
}

}  // namespace
}  // namespace vescale
