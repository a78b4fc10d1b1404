// JobMesh: the layout questions the trainer, plan lint, checkpoints and clipping ask.
#include "mesh/job_mesh.h"

#include <gtest/gtest.h>

#include <mutex>

#include "support/run_ranks.h"

namespace vescale {
namespace {

TEST(JobMesh, RanksAndParameterMeshOnPp2Dp2Tp2) {
  // Rank 6 of pp=2 x dp=2 x tp=2 sits at (1, 1, 0).
  const JobMesh mesh = JobMesh::layout(2, 2, 2, 6);
  EXPECT_EQ(mesh.pp_rank(), 1);
  EXPECT_EQ(mesh.dp_rank(), 1);
  EXPECT_EQ(mesh.tp_rank(), 0);
  EXPECT_EQ(mesh.dp(), 2);
  EXPECT_EQ(mesh.param_mesh().dim_names(), std::vector<std::string>{"tp"});
  EXPECT_EQ(mesh.param_mesh().world_rank(), 6);
  EXPECT_EQ(mesh.param_mesh_dims(), std::vector<int>{2});
}

TEST(JobMesh, TwoDimensionalTpMesh) {
  // Rank 7 of pp=1 x dp=2 x tp_a=2 x tp_b=2 sits at (0, 1, 1, 1): tp rank 3 of 4.
  const JobMesh mesh = JobMesh::layout(1, 2, std::vector<int64_t>{2, 2}, 7);
  EXPECT_EQ(mesh.mesh().dim_names(), (std::vector<std::string>{"pp", "dp", "tp_a", "tp_b"}));
  EXPECT_EQ(mesh.param_mesh().dim_names(), (std::vector<std::string>{"tp_a", "tp_b"}));
  EXPECT_EQ(mesh.param_mesh_dims(), (std::vector<int>{2, 3}));
  EXPECT_EQ(mesh.tp(), 4);
  EXPECT_EQ(mesh.dp_rank(), 1);
  EXPECT_EQ(mesh.tp_rank(), 3);
  EXPECT_EQ(JobMesh::layout(1, 2, std::vector<int64_t>{2, 2}, 6).tp_rank(), 2);
  // Sharded over tp_b only: split over that dim, replicated over pp, dp and tp_a.
  EXPECT_EQ(mesh.split_dims({false, true}), std::vector<int>{3});
}

TEST(JobMesh, SplitAndReplicatedDims) {
  const JobMesh mesh = JobMesh::layout(1, 4, 2, 5);  // (0, 2, 1)
  // A tp-sharded parameter: split over tp, replicated over pp and dp.
  EXPECT_EQ(mesh.split_dims({true}), std::vector<int>{2});
  EXPECT_EQ(mesh.replicated_dims({2}), (std::vector<int>{0, 1}));
  // Its state split over dp too (ZeRO): split over dp and tp.
  EXPECT_EQ(mesh.split_dims({true}, {"dp"}), (std::vector<int>{1, 2}));
  EXPECT_EQ(mesh.split_dims({false}), std::vector<int>{});
}

TEST(JobMesh, ReplicaOfAPieceIsItsCoordinateOverTheOtherDims) {
  // dp=4 x tp=2: a tp-sharded piece has 4 replicas numbered by dp rank; a replicated one 8.
  for (int rank = 0; rank < 8; ++rank) {
    const JobMesh mesh = JobMesh::layout(1, 4, 2, rank);
    const Replica sharded = mesh.replica({2});
    EXPECT_EQ(sharded.count, 4);
    EXPECT_EQ(sharded.index, rank / 2);
    const Replica replicated = mesh.replica({});
    EXPECT_EQ(replicated.count, 8);
    EXPECT_EQ(replicated.index, rank);
    const Replica unique = mesh.replica({1, 2});
    EXPECT_EQ(unique.count, 1);
    EXPECT_EQ(unique.index, 0);
  }
}

TEST(JobMesh, ContextParallelDimSitsBetweenDpAndTp) {
  // Rank 5 of pp=1 x dp=2 x cp=2 x tp=2 sits at (0, 1, 0, 1).
  const JobMesh mesh = JobMesh::layout(job_mesh_dims({{"dp", 2}, {"cp", 2}}, {2}), 5);
  EXPECT_EQ(mesh.mesh().dim_names(), (std::vector<std::string>{"pp", "dp", "cp", "tp"}));
  EXPECT_EQ(mesh.cp(), 2);
  EXPECT_EQ(mesh.cp_rank(), 0);
  EXPECT_EQ(mesh.dp_rank(), 1);
  EXPECT_EQ(mesh.tp_rank(), 1);
  EXPECT_EQ(mesh.data_dims(), (std::vector<std::string>{"dp", "cp"}));
  EXPECT_EQ(mesh.param_dims({true}).averaged_sizes, (std::vector<int64_t>{2, 2}));
  // Without context parallelism the mesh keeps its three dims.
  const JobMesh plain = JobMesh::layout(job_mesh_dims({{"dp", 2}}, {2}), 5 % 4);
  EXPECT_EQ(plain.mesh().dim_names(), (std::vector<std::string>{"pp", "dp", "tp"}));
  EXPECT_EQ(plain.cp(), 1);
  EXPECT_EQ(plain.data_dims(), std::vector<std::string>{"dp"});
}

TEST(JobMesh, ReplicasAreDpByCpNumberedDpMajor) {
  // dp=2 x cp=2 x tp=2: the ranks of one tp coordinate are the 4 replicas, rank dp x 2 + cp.
  std::mutex mu;
  std::vector<std::vector<int>> members(8);
  std::vector<int> rank_in(8);
  testing::run_ranks(8, [&](const comm::Group& world) {
    const JobMesh mesh(world, job_mesh_dims({{"dp", 2}, {"cp", 2}}, {2}));
    const comm::Group& replicas = mesh.data_group();
    EXPECT_EQ(&mesh.replicas_of(mesh.param_dims({false}).averaged), &replicas);
    std::lock_guard<std::mutex> lock(mu);
    members[world.rank()] = replicas.root_ranks();
    rank_in[world.rank()] = replicas.rank();
    EXPECT_EQ(replicas.rank(), mesh.dp_rank() * 2 + mesh.cp_rank());
    EXPECT_EQ(replicas.label(), "dp");
  });
  EXPECT_EQ(members[0], (std::vector<int>{0, 2, 4, 6}));
  EXPECT_EQ(members[3], (std::vector<int>{1, 3, 5, 7}));
  EXPECT_EQ(rank_in[6], 3);
}

TEST(JobMesh, EachRoleIsOneRowOfTheTable) {
  // NOTE [Dims by role]: every role has its row, in the enum's order, and exactly one job.
  for (DimRole role : {DimRole::kPipeline, DimRole::kData, DimRole::kContext,
                       DimRole::kContextExpert, DimRole::kTensor}) {
    const DimRoleRow& row = role_row(role);
    EXPECT_EQ(row.role, role);
    EXPECT_EQ(row.carries_stages + row.splits_batch + row.splits_sequence + row.shards_params, 1);
  }
  EXPECT_TRUE(role_row(DimRole::kData).splits_batch);
  EXPECT_TRUE(role_row(DimRole::kContext).splits_sequence);
  // ep does two jobs: part of the data parallelism, and the holders of the experts.
  const DimRoleRow& ep = role_row(DimRole::kExpert);
  EXPECT_EQ(ep.role, DimRole::kExpert);
  EXPECT_TRUE(ep.splits_batch && ep.holds_experts);
  EXPECT_FALSE(ep.carries_stages || ep.splits_sequence || ep.shards_params);
  // A dim is a name and a row: the outer dims come from the table, cp only when larger than 1.
  const MeshDims dims = job_mesh_dims({{"pp", 2}, {"dp", 3}, {"cp", 1}}, {4});
  ASSERT_EQ(dims.size(), 3u);
  EXPECT_EQ(dims[1].name, "dp");
  EXPECT_EQ(dims[1].size, 3);
  EXPECT_EQ(dims[1].role, DimRole::kData);
  EXPECT_THROW(job_mesh_dims({{"xp", 2}}, {1}), std::exception);
}

TEST(JobMesh, EachParameterIsAskedOverWhichDims) {
  // pp=2 x dp=2 x cp=2 x tp=2, rank 13 at (1, 1, 0, 1).
  const JobMesh mesh = JobMesh::layout(job_mesh_dims({{"pp", 2}, {"dp", 2}, {"cp", 2}}, {2}), 13);
  EXPECT_EQ(mesh.batch_shards(), 2);
  EXPECT_EQ(mesh.batch_rank(), 1);
  // A tp-sharded and a replicated parameter: averaged over dp x cp, held along pp (stages).
  for (bool sharded : {true, false}) {
    const JobMesh::ParamDims p = mesh.param_dims({sharded});
    EXPECT_EQ(p.averaged, (std::vector<std::string>{"dp", "cp"}));
    EXPECT_EQ(p.averaged_sizes, (std::vector<int64_t>{2, 2}));
    EXPECT_EQ(p.held_along, std::vector<int>{0});
    // The norm splits it over its shard and the stages, and under ZeRO over dp x cp too.
    EXPECT_EQ(p.norm_split(false), sharded ? (std::vector<int>{0, 3}) : std::vector<int>{0});
    EXPECT_EQ(p.norm_split(true),
              sharded ? (std::vector<int>{0, 1, 2, 3}) : (std::vector<int>{0, 1, 2}));
  }
  // The norm reduces over tp, the stages and (ZeRO) the data dims, in that order.
  EXPECT_EQ(mesh.norm_dims(false), (std::vector<int>{3, 0}));
  EXPECT_EQ(mesh.norm_dims(true), (std::vector<int>{3, 0, 1, 2}));
  // One stage: nothing is held along pp.
  const JobMesh flat = JobMesh::layout(job_mesh_dims({{"dp", 2}}, {2}), 1);
  EXPECT_TRUE(flat.param_dims({true}).held_along.empty());
  EXPECT_EQ(flat.norm_dims(false), std::vector<int>{2});
}

TEST(JobMesh, ExpertParallelismIsPartOfDpAndHoldsTheExperts) {
  // NOTE [Expert parallelism]: parallel.dp = 4 with ep = 2 is dp 2 x ep 2; x cp 2 x tp 1, rank
  // 13 of pp=2 at (1, 1, 0, 1, 0).
  const JobMesh mesh =
      JobMesh::layout(job_mesh_dims({{"pp", 2}, {"dp", 2}, {"ep", 2}, {"cp", 2}}, {1}), 13);
  EXPECT_EQ(mesh.mesh().dim_names(), (std::vector<std::string>{"pp", "dp", "ep", "cp", "tp"}));
  EXPECT_EQ(mesh.ep(), 2);
  EXPECT_EQ(mesh.ep_rank(), 0);
  EXPECT_EQ(mesh.dp_rank(), 1);
  // The batch is split over dp x ep, numbered dp-major; the loss averages over dp x ep x cp.
  EXPECT_EQ(mesh.batch_shards(), 4);
  EXPECT_EQ(mesh.batch_rank(), 2);
  EXPECT_EQ(mesh.data_dims(), (std::vector<std::string>{"dp", "ep", "cp"}));
  // A dense parameter is a replica over every data dim; an expert's ranks along ep hold other
  // experts: it is averaged over dp x cp and held along the stages and ep.
  const JobMesh::ParamDims dense = mesh.param_dims({false});
  EXPECT_EQ(dense.averaged, (std::vector<std::string>{"dp", "ep", "cp"}));
  EXPECT_EQ(dense.held_along, std::vector<int>{0});
  const JobMesh::ParamDims expert = mesh.param_dims({false}, /*expert=*/true);
  EXPECT_EQ(expert.averaged, (std::vector<std::string>{"dp", "cp"}));
  EXPECT_EQ(expert.averaged_sizes, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(expert.held_along, (std::vector<int>{0, 2}));
  EXPECT_EQ(expert.norm_split(false), (std::vector<int>{0, 2}));
  EXPECT_EQ(expert.norm_split(true), (std::vector<int>{0, 1, 2, 3}));
  // The norm reduces over tp, the stages, the expert holders and (ZeRO) the data dims, once each.
  EXPECT_EQ(mesh.norm_dims(false), (std::vector<int>{4, 0, 2}));
  EXPECT_EQ(mesh.norm_dims(true), (std::vector<int>{4, 0, 2, 1, 3}));
  // ep = 1: no ep dim, nothing changes.
  EXPECT_EQ(job_mesh_dims({{"dp", 4}, {"ep", 1}}, {1}).size(), 3u);
}

TEST(JobMesh, ExpertParallelismCarvedFromDpAndCp) {
  // NOTE [Expert parallelism]: parallel.dp = 2, cp = 4, ep = 4 is dp 1 x ep 2 x cp 2 x cp_ep 2;
  // rank r = 4 ep + 2 cp + cp_ep. The ep group is ep x cp_ep, the ring cp x cp_ep.
  const MeshDims dims = job_mesh_dims({{"dp", 1}, {"ep", 2}, {"cp", 2}, {"cp_ep", 2}}, {1});
  const DimRoleRow& cp_ep = role_row(DimRole::kContextExpert);
  EXPECT_TRUE(cp_ep.splits_sequence && cp_ep.holds_experts);
  EXPECT_FALSE(cp_ep.carries_stages || cp_ep.splits_batch || cp_ep.shards_params);
  const JobMesh layout = JobMesh::layout(dims, 5);
  EXPECT_EQ(layout.mesh().dim_names(),
            (std::vector<std::string>{"pp", "dp", "ep", "cp", "cp_ep", "tp"}));
  EXPECT_EQ(layout.ep(), 4);
  EXPECT_EQ(layout.ep_rank(), 3);
  EXPECT_EQ(layout.cp(), 4);
  EXPECT_EQ(layout.cp_rank(), 1);
  EXPECT_EQ(layout.batch_shards(), 2);
  EXPECT_EQ(layout.batch_rank(), 1);
  // An expert's replicas are the data dims that hold no experts; it is held along ep and cp_ep.
  const JobMesh::ParamDims expert = layout.param_dims({false}, /*expert=*/true);
  EXPECT_EQ(expert.averaged, (std::vector<std::string>{"dp", "cp"}));
  EXPECT_EQ(expert.held_along, (std::vector<int>{2, 4}));
  EXPECT_EQ(layout.param_dims({false}).averaged,
            (std::vector<std::string>{"dp", "ep", "cp", "cp_ep"}));
  EXPECT_EQ(layout.norm_dims(false), (std::vector<int>{5, 2, 4}));

  std::mutex mu;
  std::vector<std::vector<int>> ep_members(8), ring_members(8), expert_replicas(8);
  testing::run_ranks(8, [&](const comm::Group& world) {
    const JobMesh mesh(world, dims);
    const comm::Group& ep = mesh.expert_group();
    const comm::Group& ring = mesh.sequence_group();
    EXPECT_EQ(ep.rank(), mesh.ep_rank());
    EXPECT_EQ(ring.rank(), mesh.cp_rank());
    EXPECT_EQ(ep.label(), "ep");
    EXPECT_EQ(ring.label(), "cp");
    const comm::Group& replicas = mesh.replicas_of(mesh.param_dims({false}, true).averaged);
    std::lock_guard<std::mutex> lock(mu);
    ep_members[world.rank()] = ep.root_ranks();
    ring_members[world.rank()] = ring.root_ranks();
    expert_replicas[world.rank()] = replicas.root_ranks();
  });
  EXPECT_EQ(ep_members[0], (std::vector<int>{0, 1, 4, 5}));
  EXPECT_EQ(ep_members[6], (std::vector<int>{2, 3, 6, 7}));
  EXPECT_EQ(ring_members[5], (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(expert_replicas[1], (std::vector<int>{1, 3}));
  // ep over cp alone (parallel.dp = 1, cp = ep = 2): one dim, cp_ep, is both groups' ranks.
  testing::run_ranks(2, [&](const comm::Group& world) {
    const JobMesh mesh(world, job_mesh_dims({{"cp_ep", 2}}, {1}));
    EXPECT_EQ(mesh.ep(), 2);
    EXPECT_EQ(mesh.cp(), 2);
    EXPECT_EQ(mesh.expert_group().label(), "ep");
    EXPECT_EQ(mesh.sequence_group().label(), "cp");
    EXPECT_EQ(mesh.expert_group().rank(), world.rank());
    EXPECT_EQ(mesh.sequence_group().rank(), world.rank());
  });
}

}  // namespace
}  // namespace vescale
