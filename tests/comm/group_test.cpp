// Every collective on 1, 2, 3 and 4 ranks, and point-to-point transfers on 2, 3 and 4: values,
// and counted bytes against the analytic volume of NOTE [Communication volume].
#include "comm/group.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
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

/// A world size, and whether Gloo stages the tensors through host buffers of their own as it does
/// CUDA tensors (NOTE [Gloo with CUDA tensors]): every result must then come back by the copy.
struct Ranks {
  int world;
  bool staged;
};

std::string ranks_name(const ::testing::TestParamInfo<Ranks>& info) {
  return "world" + std::to_string(info.param.world) + (info.param.staged ? "Staged" : "");
}

/// Runs `fn` on the parameter's ranks, staged or not.
class OnRanks : public ::testing::TestWithParam<Ranks> {
 protected:
  static void on_ranks(const std::function<void(const Group&)>& fn) {
    GroupOptions options;
    options.stage_on_host = GetParam().staged;
    run_ranks(GetParam().world, fn, options);
  }
};

class Collectives : public OnRanks {};

TEST_P(Collectives, AllReduceSumAvgMax) {
  const int n = GetParam().world;
  on_ranks([n](const Group& g) {
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
  const int n = GetParam().world;
  on_ranks([n](const Group& g) {
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
  const int n = GetParam().world;
  on_ranks([n](const Group& g) {
    at::Tensor out = g.all_gather(tagged(g.rank(), {2, 3}), 0, std::vector<int64_t>(n, 2));
    ASSERT_EQ(out.sizes(), (std::vector<int64_t>{2 * n, 3}));
    for (int r = 0; r < n; ++r)
      EXPECT_TRUE(at::equal(out.narrow(0, 2 * r, 2), tagged(r, {2, 3})));
    EXPECT_EQ(g.stats().bytes("world", CommKind::kAllGather), (n - 1) * 6 * kF64);
  });
}

TEST_P(Collectives, AllGatherUnevenOnInnerDim) {
  // 4k+1 columns split as torch.chunk does: trailing pieces smaller, possibly empty.
  const int n = GetParam().world;
  const int64_t cols = 4 * n + 1;
  on_ranks([n, cols](const Group& g) {
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
  const int n = GetParam().world;
  on_ranks([n](const Group& g) {
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
  const int n = GetParam().world;
  for (int64_t rows : {int64_t{2} * n, int64_t{4} * n + 1, int64_t{1}}) {
    on_ranks([n, rows](const Group& g) {
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
  const int n = GetParam().world;
  on_ranks([n](const Group& g) {
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
  const int n = GetParam().world;
  on_ranks([n](const Group& g) {
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
  const int n = GetParam().world;
  on_ranks([n](const Group& g) {
    for (int root = 0; root < n; ++root) {
      at::Tensor t = g.rank() == root ? tagged(root, {7}) : at::zeros({7}, at::kDouble);
      g.broadcast(t, root);
      EXPECT_TRUE(at::equal(t, tagged(root, {7})));
    }
    EXPECT_EQ(g.stats().bytes("world", CommKind::kBroadcast), (n - 1) * 7 * kF64);
  });
}

TEST_P(Collectives, SendRecvRingAndBarrier) {
  const int n = GetParam().world;
  if (n == 1) GTEST_SKIP() << "point-to-point needs a peer";
  on_ranks([n](const Group& g) {
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

INSTANTIATE_TEST_SUITE_P(Ranks, Collectives,
                         ::testing::Values(Ranks{1, false}, Ranks{2, false}, Ranks{3, false},
                                           Ranks{4, false}, Ranks{2, true}, Ranks{3, true}),
                         ranks_name);

TEST(Collectives, SizeOneGroupIsFree) {
  run_ranks(1, [](const Group& g) {
    at::Tensor t = tagged(0, {4});
    g.all_reduce(t);
    EXPECT_TRUE(at::equal(t, tagged(0, {4})));
    EXPECT_TRUE(g.all_gather(t).is_same(t));
    EXPECT_EQ(g.stats().total_bytes(), 0);
  });
}

/// What rank 0 saw when rank 1 of its 2-rank group (timeout 1.5 s) called nothing for 4 s.
struct Abandoned {
  double seconds = 0;  ///< how long rank 0's call took
  bool timed_out = false;
  int64_t bytes = 0;  ///< counted by rank 0
};

Abandoned run_abandoned(const std::function<void(const Group&)>& rank0_call) {
  GroupOptions options;
  options.backend = Backend::kGloo;
  options.timeout = std::chrono::milliseconds(1500);
  const Store store = Store::in_memory();
  Abandoned out;
  std::thread rank1([&] {
    Group g = Group::create(store, 1, 2, options);
    std::this_thread::sleep_for(std::chrono::milliseconds(4000));
  });
  {
    Group g = Group::create(store, 0, 2, options);
    const auto start = std::chrono::steady_clock::now();
    try {
      rank0_call(g);
    } catch (const TimeoutError& e) {
      out.timed_out = true;
      std::printf("rank 0: %s\n", e.what());
    }
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    out.bytes = g.stats().total_bytes();
    rank1.join();
  }
  return out;
}

TEST(Collectives, TimeoutThrowsInsteadOfHanging) {
  // Rank 1 never joins rank 0's all-reduce: rank 0 must fail within its timeout, not hang.
  const Abandoned run = run_abandoned([](const Group& g) {
    at::Tensor t = at::ones({4});
    g.all_reduce(t);
  });
  const double seconds = run.seconds;
  std::printf("all_reduce gave up after %.2fs (timeout 1.5s)\n", seconds);
  EXPECT_TRUE(run.timed_out);
  EXPECT_GE(seconds, 1.4);
  EXPECT_LT(seconds, 10.0);
}

// Non-blocking point-to-point: every transfer is posted before any is waited for.
class PointToPoint : public OnRanks {};

TEST_P(PointToPoint, RingShiftPostedBeforeAnyWait) {
  const int n = GetParam().world;
  on_ranks([n](const Group& g) {
    const int next = (g.rank() + 1) % n, prev = (g.rank() + n - 1) % n;
    at::Tensor base = at::zeros({5, 3}, at::kDouble);
    at::Tensor in = base.t();  // non-contiguous: the values must land in `base`
    Work received = g.irecv(in, prev, 3);
    Work sent = g.isend(tagged(g.rank(), {3, 5}), next, 3);
    // Nothing is counted until the transfers are waited for.
    EXPECT_EQ(g.stats().total_bytes(), 0);
    received.wait();
    sent.wait();
    EXPECT_TRUE(at::equal(in, tagged(prev, {3, 5})));
    EXPECT_TRUE(at::equal(base, tagged(prev, {3, 5}).t()));
    const auto counts = g.stats().snapshot();
    EXPECT_EQ(g.stats().bytes("world", CommKind::kSend), 15 * kF64);
    EXPECT_EQ(g.stats().bytes("world", CommKind::kRecv), 0);
    EXPECT_EQ(counts.at({"world", CommKind::kSend}).calls, 1);
    EXPECT_EQ(counts.at({"world", CommKind::kRecv}).calls, 1);
    sent.wait();  // a second wait is a no-op: nothing counted twice
    EXPECT_EQ(g.stats().bytes("world", CommKind::kSend), 15 * kF64);
  });
}

TEST_P(PointToPoint, BatchWithSeveralTensorsPerPeerAndDistinctTags) {
  // Three tensors of three dtypes to every peer, told apart by their tags; receives are posted in
  // the reverse order of the sends, so only the tags can match them.
  const int n = GetParam().world;
  const std::vector<std::pair<std::vector<int64_t>, at::ScalarType>> kinds{
      {{4}, at::kDouble}, {{2, 3}, at::kFloat}, {{5}, at::kLong}};
  const int64_t bytes_per_peer = 4 * kF64 + 6 * kF32 + 5 * 8;  // 96
  auto payload = [&](int src, int dst, int tag) {
    const auto& [shape, dtype] = kinds[tag];
    const int64_t numel = c10::multiply_integers(shape);
    return (at::arange(numel, at::kDouble) + 1000 * src + 100 * dst + 10 * tag)
        .to(dtype)
        .view(shape);
  };
  on_ranks([&](const Group& g) {
    std::vector<P2POp> ops;
    std::vector<at::Tensor> inbox;
    for (int peer = 0; peer < n; ++peer) {
      if (peer == g.rank()) continue;
      for (int tag = 2; tag >= 0; --tag) {
        inbox.push_back(at::zeros(kinds[tag].first, kinds[tag].second));
        ops.push_back({P2POp::Kind::kRecv, inbox.back(), peer, tag});
      }
      for (int tag = 0; tag < 3; ++tag)
        ops.push_back({P2POp::Kind::kSend, payload(g.rank(), peer, tag), peer, tag});
    }
    std::vector<Work> works = g.batch_isend_irecv(ops);
    ASSERT_EQ(works.size(), ops.size());
    for (Work& work : works)
      work.wait();
    for (const P2POp& op : ops) {
      if (op.kind == P2POp::Kind::kRecv) {
        EXPECT_TRUE(at::equal(op.tensor, payload(op.peer, g.rank(), op.tag)))
            << "from " << op.peer << " tag " << op.tag;
      }
    }
    const auto counts = g.stats().snapshot();
    EXPECT_EQ(g.stats().bytes("world", CommKind::kSend), (n - 1) * bytes_per_peer);
    EXPECT_EQ(g.stats().bytes("world", CommKind::kRecv), 0);
    EXPECT_EQ(counts.at({"world", CommKind::kSend}).calls, 3 * (n - 1));
    EXPECT_EQ(counts.at({"world", CommKind::kRecv}).calls, 3 * (n - 1));
    if (g.rank() == 0) {
      std::printf("batch on %d ranks: %lld bytes sent per rank ((n-1) x 96)\n", n,
                  static_cast<long long>(g.stats().bytes("world", CommKind::kSend)));
    }
  });
}

TEST_P(PointToPoint, RejectsSelfOutOfRangeAndForeignDevice) {
  const int n = GetParam().world;
  on_ranks([n](const Group& g) {
    at::Tensor t = at::zeros({2}, at::kDouble);
    EXPECT_THROW(g.isend(t, g.rank()), Error);
    EXPECT_THROW(g.irecv(t, n), Error);
    EXPECT_THROW(g.irecv(t, -1), Error);
    // The group works on the CPU: a tensor elsewhere (here: meta) is refused before any transfer.
    at::Tensor elsewhere = at::empty({2}, at::TensorOptions().dtype(at::kDouble).device(at::kMeta));
    EXPECT_THROW(g.isend(elsewhere, (g.rank() + 1) % n), Error);
    EXPECT_THROW(g.all_reduce(elsewhere), Error);
    EXPECT_EQ(g.stats().total_bytes(), 0);
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, PointToPoint,
                         ::testing::Values(Ranks{2, false}, Ranks{3, false}, Ranks{4, false},
                                           Ranks{3, true}),
                         ranks_name);

TEST(PointToPoint, WaitTimesOutWhenThePeerNeverPosts) {
  // Rank 1 never posts the matching transfer: rank 0's isend or irecv returns at once, and its
  // wait fails within the group's timeout instead of hanging, counting nothing.
  for (const P2POp::Kind kind : {P2POp::Kind::kRecv, P2POp::Kind::kSend}) {
    const char* name = kind == P2POp::Kind::kSend ? "isend" : "irecv";
    double post_seconds = 0;
    const Abandoned run = run_abandoned([&](const Group& g) {
      at::Tensor t = at::zeros({4});
      const auto start = std::chrono::steady_clock::now();
      Work work = kind == P2POp::Kind::kSend ? g.isend(t, 1) : g.irecv(t, 1);
      post_seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      work.wait();
    });
    std::printf("%s posted in %.3fs, wait gave up after %.2fs (timeout 1.5s)\n", name, post_seconds,
                run.seconds);
    EXPECT_TRUE(run.timed_out) << name;
    EXPECT_EQ(run.bytes, 0) << name;
    EXPECT_LT(post_seconds, 0.5) << name;
    EXPECT_GE(run.seconds, 1.4) << name;
    EXPECT_LT(run.seconds, 10.0) << name;
  }
}

/// Why NCCL groups cannot be made here: a CPU build has no NCCL (NOTE [No-NCCL stub]); a CUDA
/// build on a machine without a GPU has NCCL but nothing for it to run on.
std::string why_no_nccl() {
  return nccl_version().empty() ? "comm.backend = 'nccl', but this build has no NCCL"
                                : "comm.backend = 'nccl', but this process sees no GPU (NCCL " +
                                      nccl_version() + " is built in";
}

TEST(Collectives, NcclGroupsWithoutNcclOrAGpuSayWhy) {
  if (nccl_available()) GTEST_SKIP() << "this build has NCCL and a GPU";
  GroupOptions options;
  options.backend = Backend::kNccl;
  try {
    Group::create(Store::in_memory(), 0, 2, options);
    FAIL() << "expected an error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(why_no_nccl()), std::string::npos) << e.what();
  }
  options.backend = Backend::kAuto;
  EXPECT_EQ(Group::create(Store::in_memory(), 0, 1, options).backend(), Backend::kGloo);
}

/// The message of the UserError that resolve_backend throws, or "(no error)".
std::string backend_error(Backend requested, Device device, bool shared_gpu = false) {
  try {
    resolve_backend(requested, device, shared_gpu);
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no error)";
}

// NOTE [Ranks sharing a GPU]: auto is Gloo there, and NCCL is refused by name, on any build.
TEST(Backends, RanksSharingAGpuGoOverGlooAndNcclIsRefused) {
  const Device gpu(c10::kCUDA, 0);
  EXPECT_EQ(resolve_backend(Backend::kAuto, gpu, /*shared_gpu=*/true), Backend::kGloo);
  EXPECT_EQ(resolve_backend(Backend::kGloo, gpu, /*shared_gpu=*/true), Backend::kGloo);
  EXPECT_EQ(backend_error(Backend::kNccl, gpu, /*shared_gpu=*/true),
            "[comm] comm.backend = 'nccl', but this node's ranks share GPUs (more local ranks than "
            "GPUs) and NCCL takes one rank a GPU: set comm.backend = 'gloo' (or 'auto') to share "
            "them, or start at most one rank a GPU");
}

TEST(Backends, AutoIsNcclOnCudaAndGlooOnCpu) {
  const Device gpu(c10::kCUDA, 1);  // a device name only: nothing is allocated on it
  EXPECT_EQ(resolve_backend(Backend::kAuto, gpu), Backend::kNccl);
  EXPECT_EQ(resolve_backend(Backend::kAuto, kCpu), Backend::kGloo);
  EXPECT_EQ(resolve_backend(Backend::kGloo, kCpu), Backend::kGloo);
  // Gloo takes CUDA tensors through host memory (NOTE [Gloo with CUDA tensors]).
  EXPECT_EQ(resolve_backend(Backend::kGloo, gpu), Backend::kGloo);
  if (nccl_available()) {
    EXPECT_EQ(resolve_backend(Backend::kNccl, gpu), Backend::kNccl);
    EXPECT_NE(backend_error(Backend::kNccl, kCpu).find("'nccl' moves CUDA tensors"),
              std::string::npos);
  } else {
    // No NCCL or no GPU: explicit NCCL fails on any device, before any connection is tried.
    for (const Device& device : {kCpu, gpu}) {
      EXPECT_NE(backend_error(Backend::kNccl, device).find(why_no_nccl()), std::string::npos)
          << device;
    }
    GroupOptions options;
    options.backend = Backend::kNccl;
    EXPECT_THROW(Group::create(Store::in_memory(), 0, 1, options), UserError);
  }
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

/// Options whose connects of the group labelled `label` fail on its member `rank`, the first
/// `count` attempts, as a lost Gloo connection does: after the exchange (NOTE [Connect retry]).
GroupOptions failing_connects(const std::string& label, int rank, int count) {
  GroupOptions options;
  options.on_connect_attempt = [=](const std::string& group, int member, int attempt) {
    if (group == label && member == rank && attempt <= count)
      throw std::runtime_error("injected for a test");
  };
  return options;
}

// NOTE [Connect retry]: one member's lost connection makes every member connect again.
TEST(Collectives, ConnectFailureOnOneRankIsRetriedByAll) {
  run_ranks(
      4,
      [](const Group& world) {
        Group tp = world.split({{0, 1, 2, 3}}, "tp");
        at::Tensor t = at::full({4}, double(world.rank()), at::kDouble);
        tp.all_reduce(t);
        EXPECT_TRUE(at::equal(t, at::full({4}, 6.0, at::kDouble)));
      },
      failing_connects("tp", 2, 2));
}

TEST(Collectives, ConnectGivesUpOnEveryRankAfterThreeFailures) {
  std::vector<std::string> errors(3);
  run_ranks(
      3,
      [&](const Group& world) {
        try {
          world.split({{0, 1, 2}}, "tp");
        } catch (const Error& e) {
          errors[world.rank()] = e.what();
        }
      },
      failing_connects("tp", 1, 3));
  for (int r = 0; r < 3; ++r) {
    std::printf("rank %d: %s\n", r, errors[r].c_str());
    EXPECT_NE(errors[r].find("connect over tp"), std::string::npos) << r;
  }
  EXPECT_NE(errors[1].find("injected for a test"), std::string::npos);
  EXPECT_NE(errors[0].find("1 other member(s) failed to connect (3 attempts)"), std::string::npos);
}

}  // namespace
}  // namespace vescale::comm
