// Every collective on 1, 2, 3 and 4 ranks: values, and counted bytes against the analytic volume
// of NOTE [Communication volume].
#include "comm/group.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "core/chunking.h"
#include "core/error.h"
#include "support/run_ranks.h"

namespace vescale::comm {
namespace {

using testing::run_ranks;

constexpr int64_t kF32 = 4;  // bytes per float32 element
constexpr int64_t kF64 = 8;

/// A tensor whose every element says which rank made it and where it sits.
at::Tensor tagged(int rank, std::vector<int64_t> shape, at::ScalarType dtype = at::kDouble) {
  const int64_t numel = c10::multiply_integers(shape);
  return (at::arange(numel, at::TensorOptions().dtype(dtype)) + 1000.0 * rank).view(shape);
}

class Collectives : public ::testing::TestWithParam<int> {};

TEST_P(Collectives, AllReduceSumAvgMax) {
  const int n = GetParam();
  run_ranks(n, [n](const Group& g) {
    at::Tensor sum = tagged(g.rank(), {5, 3});
    at::Tensor avg = sum.clone();
    at::Tensor max = sum.clone();
    g.all_reduce(sum, ReduceOp::kSum);
    g.all_reduce(avg, ReduceOp::kAvg);
    g.all_reduce(max, ReduceOp::kMax);
    at::Tensor expected = at::zeros({5, 3}, at::kDouble);
    for (int r = 0; r < n; ++r)
      expected += tagged(r, {5, 3});
    EXPECT_TRUE(at::equal(sum, expected));
    EXPECT_TRUE(at::allclose(avg, expected / n, 1e-15, 0));
    EXPECT_TRUE(at::equal(max, tagged(n - 1, {5, 3})));
    EXPECT_EQ(g.stats().bytes("world", CommKind::kAllReduce), 3 * (2 * (n - 1) * 15 * kF64 / n));
  });
}

TEST_P(Collectives, AllReduceNonContiguousAndAsync) {
  const int n = GetParam();
  run_ranks(n, [n](const Group& g) {
    at::Tensor base = tagged(g.rank(), {4, 6});
    at::Tensor column = base.t();  // non-contiguous view: the result must land in `base`
    Work work = g.all_reduce_async(column, ReduceOp::kSum);
    work.wait();
    at::Tensor expected = at::zeros({4, 6}, at::kDouble);
    for (int r = 0; r < n; ++r)
      expected += tagged(r, {4, 6});
    EXPECT_TRUE(at::equal(base, expected));
  });
}

TEST_P(Collectives, AllGatherEven) {
  const int n = GetParam();
  run_ranks(n, [n](const Group& g) {
    at::Tensor out = g.all_gather(tagged(g.rank(), {2, 3}), 0, std::vector<int64_t>(n, 2));
    ASSERT_EQ(out.sizes(), (std::vector<int64_t>{2 * n, 3}));
    for (int r = 0; r < n; ++r)
      EXPECT_TRUE(at::equal(out.narrow(0, 2 * r, 2), tagged(r, {2, 3})));
    EXPECT_EQ(g.stats().bytes("world", CommKind::kAllGather), (n - 1) * 6 * kF64);
  });
}

TEST_P(Collectives, AllGatherUnevenOnInnerDim) {
  // 4k+1 columns split as torch.chunk does: trailing pieces smaller, possibly empty.
  const int n = GetParam();
  const int64_t cols = 4 * n + 1;
  run_ranks(n, [n, cols](const Group& g) {
    const auto sizes = chunk_sizes(cols, n);
    const auto offsets = chunk_offsets(cols, n);
    at::Tensor full = tagged(0, {3, cols});
    at::Tensor local = full.narrow(1, offsets[g.rank()], sizes[g.rank()]);
    at::Tensor out = g.all_gather(local, 1, sizes);
    EXPECT_TRUE(at::equal(out, full));
    EXPECT_EQ(g.stats().bytes("world", CommKind::kAllGather), (n - 1) * 3 * sizes[g.rank()] * kF64);
  });
}

TEST_P(Collectives, AllGatherWithEmptyPiecesAndUnknownSizes) {
  // A dim smaller than the group: some ranks hold nothing. Sizes are not given: exchanged.
  const int n = GetParam();
  run_ranks(n, [n](const Group& g) {
    const auto sizes = chunk_sizes(2, n);
    at::Tensor full = tagged(0, {2, 4}, at::kFloat);
    at::Tensor local = full.narrow(0, chunk_offsets(2, n)[g.rank()], sizes[g.rank()]);
    at::Tensor out = g.all_gather(local, 0);
    EXPECT_TRUE(at::equal(out, full));
    const int64_t size_exchange = n > 1 ? (n - 1) * 8 : 0;  // one int64 per rank
    EXPECT_EQ(g.stats().bytes("world", CommKind::kAllGather),
              size_exchange + (n - 1) * 4 * sizes[g.rank()] * kF32);
  });
}

TEST_P(Collectives, ReduceScatterEvenAndUneven) {
  const int n = GetParam();
  for (int64_t rows : {int64_t{2} * n, int64_t{4} * n + 1, int64_t{1}}) {
    run_ranks(n, [n, rows](const Group& g) {
      at::Tensor input = tagged(g.rank(), {rows, 3});
      at::Tensor expected_full = at::zeros({rows, 3}, at::kDouble);
      for (int r = 0; r < n; ++r)
        expected_full += tagged(r, {rows, 3});
      const auto sizes = chunk_sizes(rows, n);
      const auto offsets = chunk_offsets(rows, n);
      at::Tensor sum = g.reduce_scatter(input, 0, ReduceOp::kSum);
      at::Tensor avg = g.reduce_scatter(input, 0, ReduceOp::kAvg);
      at::Tensor max = g.reduce_scatter(input, 0, ReduceOp::kMax);
      at::Tensor mine = expected_full.narrow(0, offsets[g.rank()], sizes[g.rank()]);
      EXPECT_TRUE(at::equal(sum, mine)) << "rows " << rows;
      EXPECT_TRUE(at::allclose(avg, mine / n, 1e-15, 0));
      EXPECT_TRUE(
          at::equal(max, tagged(n - 1, {rows, 3}).narrow(0, offsets[g.rank()], sizes[g.rank()])));
      const int64_t per_call = (rows - sizes[g.rank()]) * 3 * kF64;
      EXPECT_EQ(g.stats().bytes("world", CommKind::kReduceScatter), n > 1 ? 3 * per_call : 0);
    });
  }
}

TEST_P(Collectives, ReduceScatterOnInnerDim) {
  const int n = GetParam();
  run_ranks(n, [n](const Group& g) {
    at::Tensor input = tagged(g.rank(), {2, 2 * n + 1});
    at::Tensor out = g.reduce_scatter(input, -1);
    at::Tensor expected = at::zeros({2, 2 * n + 1}, at::kDouble);
    for (int r = 0; r < n; ++r)
      expected += tagged(r, {2, 2 * n + 1});
    const auto sizes = chunk_sizes(2 * n + 1, n);
    EXPECT_TRUE(
        at::equal(out, expected.narrow(1, chunk_offsets(2 * n + 1, n)[g.rank()], sizes[g.rank()])));
  });
}

TEST_P(Collectives, AllToAllUnevenShapes) {
  // Rank s sends rank d a (s+1) x (d+1) block.
  const int n = GetParam();
  run_ranks(n, [n](const Group& g) {
    std::vector<at::Tensor> inputs;
    std::vector<std::vector<int64_t>> out_shapes;
    int64_t sent = 0;
    for (int d = 0; d < n; ++d) {
      inputs.push_back(tagged(g.rank() * n + d, {g.rank() + 1, d + 1}));
      out_shapes.push_back({d + 1, g.rank() + 1});
      if (d != g.rank()) sent += (g.rank() + 1) * (d + 1) * kF64;
    }
    auto outputs = g.all_to_all(inputs, out_shapes);
    for (int s = 0; s < n; ++s) {
      EXPECT_TRUE(at::equal(outputs[s], tagged(s * n + g.rank(), {s + 1, g.rank() + 1})));
    }
    EXPECT_EQ(g.stats().bytes("world", CommKind::kAllToAll), sent);
  });
}

TEST_P(Collectives, BroadcastFromEveryRoot) {
  const int n = GetParam();
  run_ranks(n, [n](const Group& g) {
    for (int root = 0; root < n; ++root) {
      at::Tensor t = g.rank() == root ? tagged(root, {7}) : at::zeros({7}, at::kDouble);
      g.broadcast(t, root);
      EXPECT_TRUE(at::equal(t, tagged(root, {7})));
    }
    EXPECT_EQ(g.stats().bytes("world", CommKind::kBroadcast), (n - 1) * 7 * kF64);
  });
}

TEST_P(Collectives, SendRecvRingAndBarrier) {
  const int n = GetParam();
  if (n == 1) GTEST_SKIP() << "point-to-point needs a peer";
  run_ranks(n, [n](const Group& g) {
    const int next = (g.rank() + 1) % n, prev = (g.rank() + n - 1) % n;
    at::Tensor in = at::zeros({3}, at::kDouble);
    g.send_recv(tagged(g.rank(), {3}), next, in, prev);
    EXPECT_TRUE(at::equal(in, tagged(prev, {3})));
    // Blocking send/recv: even ranks send first, odd ranks receive first.
    at::Tensor got = at::zeros({2}, at::kDouble);
    if (g.rank() % 2 == 0) {
      if (g.rank() + 1 < n) g.send(tagged(g.rank(), {2}), g.rank() + 1, 7);
    } else {
      g.recv(got, g.rank() - 1, 7);
      EXPECT_TRUE(at::equal(got, tagged(g.rank() - 1, {2})));
    }
    g.barrier();
    const bool sent_blocking = g.rank() % 2 == 0 && g.rank() + 1 < n;
    EXPECT_EQ(g.stats().bytes("world", CommKind::kSend), 3 * kF64 + (sent_blocking ? 2 * kF64 : 0));
    EXPECT_EQ(g.stats().bytes("world", CommKind::kRecv), 0);
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, Collectives, ::testing::Values(1, 2, 3, 4),
                         [](const auto& info) { return "world" + std::to_string(info.param); });

TEST(Collectives, SizeOneGroupIsFree) {
  run_ranks(1, [](const Group& g) {
    at::Tensor t = tagged(0, {4});
    g.all_reduce(t);
    EXPECT_TRUE(at::equal(t, tagged(0, {4})));
    EXPECT_TRUE(g.all_gather(t).is_same(t));
    EXPECT_EQ(g.stats().total_bytes(), 0);
  });
}

TEST(Collectives, TimeoutThrowsInsteadOfHanging) {
  // Rank 1 never joins rank 0's all-reduce: rank 0 must fail within its timeout, not hang.
  GroupOptions options;
  options.backend = Backend::kGloo;
  options.timeout = std::chrono::milliseconds(1500);
  const Store store = Store::in_memory();
  double seconds = 0;
  bool timed_out = false;
  std::thread rank1([&] {
    Group g = Group::create(store, 1, 2, options);
    std::this_thread::sleep_for(std::chrono::milliseconds(4000));
  });
  {
    Group g = Group::create(store, 0, 2, options);
    at::Tensor t = at::ones({4});
    const auto start = std::chrono::steady_clock::now();
    try {
      g.all_reduce(t);
    } catch (const TimeoutError& e) {
      timed_out = true;
      std::printf("rank 0: %s\n", e.what());
    }
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    rank1.join();
  }
  std::printf("all_reduce gave up after %.2fs (timeout 1.5s)\n", seconds);
  EXPECT_TRUE(timed_out);
  EXPECT_GE(seconds, 1.4);
  EXPECT_LT(seconds, 10.0);
}

TEST(Collectives, SplitLabelsCountSeparately) {
  run_ranks(4, [](const Group& world) {
    Group pair = world.split({{0, 1}, {2, 3}}, "pair");
    Group odd = world.split({{0, 2}, {1, 3}}, "stripe");
    EXPECT_EQ(pair.size(), 2);
    EXPECT_EQ(pair.root_ranks(),
              (world.rank() < 2 ? std::vector<int>{0, 1} : std::vector<int>{2, 3}));
    at::Tensor t = at::full({8}, double(world.rank()), at::kDouble);
    pair.all_reduce(t);
    const double pair_sum = world.rank() < 2 ? 1 : 5;
    EXPECT_TRUE(at::equal(t, at::full({8}, pair_sum, at::kDouble)));
    at::Tensor s = at::full({8}, double(world.rank()), at::kDouble);
    odd.all_reduce(s);
    EXPECT_TRUE(at::equal(s, at::full({8}, world.rank() % 2 == 0 ? 2.0 : 4.0, at::kDouble)));
    EXPECT_EQ(world.stats().bytes("pair"), 8 * kF64);  // 2·(2-1)/2 · 64 bytes
    EXPECT_EQ(world.stats().bytes("stripe"), 8 * kF64);
    EXPECT_EQ(world.stats().bytes("world"), 0);
  });
}

TEST(Collectives, SplitRejectsBadPartition) {
  run_ranks(2, [](const Group& world) {
    EXPECT_THROW(world.split({{0, 0}, {1}}, "bad"), Error);
    EXPECT_THROW(world.split({{0}}, "bad"), Error);
  });
}

}  // namespace
}  // namespace vescale::comm
