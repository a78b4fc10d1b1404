// Layout-free random numbers: every shard equals the same slice of the single-device tensor,
// bit for bit, on 1-D and 2-D meshes, uneven shapes included.
#include "dtensor/random.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "core/host_parallel.h"
#include "dtensor/dtensor.h"
#include "dtensor/ops.h"
#include "support/run_ranks.h"

namespace vescale {
namespace {

using testing::run_ranks;

at::Tensor slice_of(const at::Tensor& full, const Box& box) {
  at::Tensor out = full;
  for (size_t d = 0; d < box.sizes.size(); ++d)
    out = out.narrow(d, box.offsets[d], box.sizes[d]);
  return out;
}

void expect_all_layouts_bitwise(const DeviceMesh& mesh, const std::vector<Placements>& layouts) {
  const RngKey key{42, stream_id("transformer.h.0.mlp.c_fc.weight")};
  for (const auto& shape : std::vector<std::vector<int64_t>>{{9, 5}, {4, 8}, {3, 2}}) {
    const at::Tensor normal_full = normal(key, Box::whole(shape), 0.0, 0.02, at::kFloat);
    const at::Tensor uniform_full = uniform(key, Box::whole(shape), -1.0, 1.0, at::kDouble);
    const at::Tensor mask_full = keep_mask(key, Box::whole(shape), 0.9);
    for (const auto& placements : layouts) {
      const Box box = Box::local(DTensorSpec(mesh, placements, shape));
      const std::string label = placements_str(placements) + " of " + std::to_string(shape[0]) +
                                "x" + std::to_string(shape[1]);
      EXPECT_TRUE(at::equal(normal(key, box, 0.0, 0.02, at::kFloat), slice_of(normal_full, box)))
          << label;
      EXPECT_TRUE(at::equal(uniform(key, box, -1.0, 1.0, at::kDouble), slice_of(uniform_full, box)))
          << label;
      EXPECT_TRUE(at::equal(keep_mask(key, box, 0.9), slice_of(mask_full, box))) << label;
    }
  }
}

TEST(LayoutFreeRandom, ShardsEqualSingleDeviceSlices1D) {
  for (int n : {2, 3, 4}) {
    run_ranks(n, [n](const comm::Group& world) {
      DeviceMesh mesh(world, MeshSpec{{n}, {"tp"}});
      expect_all_layouts_bitwise(
          mesh, {{Placement::shard(0)}, {Placement::shard(1)}, {Placement::replicate()}});
    });
  }
}

TEST(LayoutFreeRandom, ShardsEqualSingleDeviceSlices2D) {
  run_ranks(4, [](const comm::Group& world) {
    DeviceMesh mesh(world, MeshSpec::parse("dp=2,tp=2"));
    expect_all_layouts_bitwise(mesh, {{Placement::shard(0), Placement::shard(1)},
                                      {Placement::shard(1), Placement::shard(0)},
                                      {Placement::shard(0), Placement::shard(0)},
                                      {Placement::replicate(), Placement::shard(1)},
                                      {Placement::replicate(), Placement::replicate()}});
  });
}

// The values themselves, from an independent reference: Philox4x32-10 and Box-Muller written in
// Python (3 lines each) over the same libm. Fast init (NOTE [Fast init]) must keep them bit for
// bit.
TEST(LayoutFreeRandom, ValuesEqualAnIndependentReference) {
  const RngKey key{42, stream_id("w")};
  const at::Tensor x = normal(key, Box::whole({4}), 0.0, 1.0, at::kDouble);
  const std::vector<double> expected = {-0.055260387747381914, -0.9125577745246629,
                                        -1.7042081389075463, 0.13862755127042944};
  for (int64_t i = 0; i < 4; ++i)
    EXPECT_EQ(x[i].item<double>(), expected[i]) << "element " << i;
  // An element past 2^32: both halves of the 64-bit index reach the counter.
  const Box far{{int64_t{20000000000}}, {1}, {int64_t{12345678901}}};
  EXPECT_EQ(normal(key, far, 0.0, 1.0, at::kDouble).item<double>(), 1.6687634708805847);
}

// Every dtype holds the float64 values cast as ATen casts them, whatever the number of threads,
// on a box with offsets in every dim.
TEST(LayoutFreeRandom, DtypesAreTheFloat64ValuesCastAndThreadsChangeNothing) {
  const RngKey key{5, stream_id("model.layers.0.mlp.up_proj.weight")};
  const Box box{{7, 300, 520}, {5, 250, 480}, {1, 30, 17}};
  const int cores = rank_cores();
  set_rank_cores(1);
  const at::Tensor one_thread = normal(key, box, 0.0, 0.02, at::kDouble);
  const at::Tensor one_thread_mask = keep_mask(key, box, 0.9);
  set_rank_cores(3);
  const at::Tensor wide = normal(key, box, 0.0, 0.02, at::kDouble);
  EXPECT_TRUE(at::equal(wide, one_thread));
  EXPECT_TRUE(at::equal(keep_mask(key, box, 0.9), one_thread_mask));
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf})
    EXPECT_TRUE(at::equal(normal(key, box, 0.0, 0.02, dtype), wide.to(dtype))) << dtype;
  EXPECT_TRUE(at::equal(uniform(key, box, -0.1, 0.1, at::kFloat),
                        uniform(key, box, -0.1, 0.1, at::kDouble).to(at::kFloat)));
  set_rank_cores(cores);
}

TEST(LayoutFreeRandom, StatisticsAndStreams) {
  const RngKey key{7, stream_id("w")};
  const at::Tensor x = normal(key, Box::whole({200000}), 1.0, 2.0, at::kDouble);
  EXPECT_NEAR(x.mean().item<double>(), 1.0, 0.02);
  EXPECT_NEAR(x.std().item<double>(), 2.0, 0.02);
  const at::Tensor u = uniform(key, Box::whole({200000}), 0.0, 1.0, at::kDouble);
  EXPECT_GE(u.min().item<double>(), 0.0);
  EXPECT_LT(u.max().item<double>(), 1.0);
  EXPECT_NEAR(u.mean().item<double>(), 0.5, 0.005);
  EXPECT_NEAR(keep_mask(key, Box::whole({200000}), 0.9).to(at::kDouble).mean().item<double>(), 0.9,
              0.005);
  // Different streams, seeds and salts give different numbers.
  EXPECT_FALSE(at::equal(normal({7, stream_id("a")}, Box::whole({16}), 0, 1, at::kDouble),
                         normal({7, stream_id("b")}, Box::whole({16}), 0, 1, at::kDouble)));
  EXPECT_FALSE(at::equal(normal({7, 1}, Box::whole({16}), 0, 1, at::kDouble),
                         normal({8, 1}, Box::whole({16}), 0, 1, at::kDouble)));
  EXPECT_FALSE(at::equal(keep_mask(derive(key, 1), Box::whole({64}), 0.5),
                         keep_mask(derive(key, 2), Box::whole({64}), 0.5)));
}

TEST(LayoutFreeRandom, DropoutMasksAgreeAcrossLayouts) {
  run_ranks(2, [](const comm::Group& world) {
    DeviceMesh mesh(world, MeshSpec{{2}, {"tp"}});
    const RngKey key{3, stream_id("h.0.attn.dropout")};
    const at::Tensor full = at::ones({5, 6}, at::kDouble);
    const at::Tensor reference =
        full * keep_mask(key, Box::whole({5, 6}), 0.75).to(at::kDouble) / 0.75;
    for (const auto& p : {Placement::shard(0), Placement::shard(1), Placement::replicate()}) {
      DTensor y = ops::dropout(distribute_tensor(full, mesh, {p}), 0.25, key, true);
      EXPECT_TRUE(at::equal(y.full_tensor(), reference)) << p.str();
    }
  });
}

}  // namespace
}  // namespace vescale
