#include "mesh/device_mesh.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "core/error.h"
#include "support/run_ranks.h"

namespace vescale {
namespace {

using testing::run_ranks;

TEST(DeviceMesh, TwoByTwoCoordinatesAndGroups) {
  run_ranks(4, [](const comm::Group& world) {
    DeviceMesh mesh(world, MeshSpec::parse("dp=2,tp=2"));
    const int r = world.rank();
    EXPECT_EQ(mesh.coordinate(), (std::vector<int64_t>{r / 2, r % 2}));
    for (int q = 0; q < 4; ++q) {
      EXPECT_EQ(mesh.coordinate_of(q), (std::vector<int64_t>{q / 2, q % 2}));
      EXPECT_EQ(mesh.rank_at({q / 2, q % 2}), q);
    }
    // TP groups are neighbouring ranks; DP groups stride over TP.
    EXPECT_EQ(mesh.group("tp").root_ranks(), (std::vector<int>{r / 2 * 2, r / 2 * 2 + 1}));
    EXPECT_EQ(mesh.group("dp").root_ranks(), (std::vector<int>{r % 2, r % 2 + 2}));
    EXPECT_EQ(mesh.group("tp").rank(), r % 2);
    EXPECT_EQ(mesh.group("dp").label(), "dp");
    EXPECT_EQ(mesh.size("tp"), 2);
    EXPECT_EQ(mesh.numel(), 4);
  });
}

TEST(DeviceMesh, SubMeshCollectiveTouchesOnlyItsGroup) {
  run_ranks(4, [](const comm::Group& world) {
    DeviceMesh mesh(world, MeshSpec::parse("dp=2,tp=2"));
    DeviceMesh tp = mesh["tp"];
    EXPECT_EQ(tp.ndim(), 1);
    EXPECT_EQ(tp.shape(), (std::vector<int64_t>{2}));
    at::Tensor t = at::full({16}, double(world.rank()), at::kDouble);
    tp.group(0).all_reduce(t);
    // The sum over my TP pair only: ranks {0,1} -> 1, ranks {2,3} -> 5.
    const double expected = world.rank() < 2 ? 1.0 : 5.0;
    EXPECT_TRUE(at::equal(t, at::full({16}, expected, at::kDouble)));
    // Bytes are counted under "tp" and nowhere else.
    EXPECT_EQ(world.stats().bytes("tp"), 2 * (2 - 1) * 16 * 8 / 2);
    EXPECT_EQ(world.stats().bytes("dp"), 0);
    EXPECT_EQ(world.stats().bytes("world"), 0);
    // The view knows its own ranks only.
    EXPECT_TRUE(tp.contains(world.rank() ^ 1));
    EXPECT_FALSE(tp.contains(world.rank() ^ 2));
    EXPECT_EQ(tp.rank_at({1}), world.rank() / 2 * 2 + 1);
  });
}

TEST(DeviceMesh, ThreeDimsTwoByTwoByTwo) {
  run_ranks(8, [](const comm::Group& world) {
    DeviceMesh mesh(world, MeshSpec::parse("pp=2,dp=2,tp=2"));
    const int r = world.rank();
    const std::vector<int64_t> coord{r / 4, (r / 2) % 2, r % 2};
    EXPECT_EQ(mesh.coordinate(), coord);
    EXPECT_EQ(mesh.group("pp").root_ranks(), (std::vector<int>{r % 4, r % 4 + 4}));
    EXPECT_EQ(mesh.group("dp").root_ranks(),
              (std::vector<int>{r / 4 * 4 + r % 2, r / 4 * 4 + r % 2 + 2}));
    EXPECT_EQ(mesh.group("tp").root_ranks(), (std::vector<int>{r / 2 * 2, r / 2 * 2 + 1}));
    // Pipeline neighbours: the previous stage of stage 1 is stage 0, and there is no stage 2.
    if (coord[0] == 0) {
      EXPECT_FALSE(mesh.neighbor("pp", -1).has_value());
      EXPECT_EQ(mesh.neighbor("pp", +1), r + 4);
    } else {
      EXPECT_EQ(mesh.neighbor("pp", -1), r - 4);
      EXPECT_FALSE(mesh.neighbor("pp", +1).has_value());
    }
    EXPECT_EQ(mesh.neighbor("pp", +1, /*wrap=*/true), (r + 4) % 8);
    // Each dim's group reduces over exactly its line.
    for (const char* dim : {"pp", "dp", "tp"}) {
      at::Tensor t = at::full({2}, double(r), at::kDouble);
      mesh.group(dim).all_reduce(t);
      double expected = 0;
      for (int q : mesh.group(dim).root_ranks())
        expected += q;
      EXPECT_EQ(t[0].item<double>(), expected) << dim;
    }
    // A 2-D sub-mesh over dp x tp.
    DeviceMesh dp_tp = mesh.sub({"dp", "tp"});
    EXPECT_EQ(dp_tp.coordinate(), (std::vector<int64_t>{coord[1], coord[2]}));
    EXPECT_EQ(dp_tp.rank_at({1, 1}), r / 4 * 4 + 3);
    EXPECT_EQ(mesh.str().rfind("DeviceMesh(pp=2, dp=2, tp=2)", 0), 0u);
  });
}

TEST(DeviceMesh, SizeOneDimsAreRealAndFree) {
  run_ranks(2, [](const comm::Group& world) {
    DeviceMesh mesh(world, MeshSpec::parse("pp=1,dp=1,tp=2"));
    EXPECT_EQ(mesh.ndim(), 3);
    EXPECT_EQ(mesh.group("pp").size(), 1);
    EXPECT_EQ(mesh.coordinate(), (std::vector<int64_t>{0, 0, world.rank()}));
    at::Tensor t = at::ones({4});
    mesh.group("dp").all_reduce(t);
    EXPECT_TRUE(at::equal(t, at::ones({4})));
    EXPECT_EQ(world.stats().bytes("dp"), 0);
  });
}

TEST(DeviceMesh, DeviceIsTheWorldGroupsOnEveryDimAndSubMesh) {
  run_ranks(4, [](const comm::Group& world) {
    DeviceMesh mesh(world, MeshSpec::parse("dp=2,tp=2"));
    EXPECT_EQ(world.device(), kCpu);
    EXPECT_EQ(mesh.device(), world.device());
    EXPECT_EQ(mesh["tp"].device(), world.device());
    EXPECT_EQ(mesh.group("dp").device(), world.device());
    EXPECT_EQ(mesh.group("tp").device(), world.device());
  });
  EXPECT_EQ(DeviceMesh::layout(MeshSpec::parse("dp=2,tp=2"), 3).device(), kCpu);
}

TEST(DeviceMesh, RejectsMeshThatIsNotTheWorld) {
  run_ranks(2, [](const comm::Group& world) {
    try {
      DeviceMesh mesh(world, MeshSpec::parse("dp=2,tp=2"));
      FAIL() << "expected an error";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("has 4 ranks but the world has 2"), std::string::npos)
          << e.what();
    }
  });
}

TEST(MeshSpec, ParsesAndRejects) {
  MeshSpec spec = MeshSpec::parse("pp=1,dp=2,tp=4");
  EXPECT_EQ(spec.shape, (std::vector<int64_t>{1, 2, 4}));
  EXPECT_EQ(spec.dim_names, (std::vector<std::string>{"pp", "dp", "tp"}));
  EXPECT_EQ(spec.numel(), 8);
  EXPECT_EQ(spec.str(), "pp=1,dp=2,tp=4");
  for (const char* bad : {"", "tp", "tp=0", "tp=x", "=2", "tp=2,tp=2", "tp=2,"}) {
    EXPECT_THROW(MeshSpec::parse(bad), UserError) << bad;
  }
}

}  // namespace
}  // namespace vescale
