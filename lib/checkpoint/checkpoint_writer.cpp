#include "checkpoint/checkpoint_writer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <optional>

#include "checkpoint/checkpoint_commit.h"
#include "core/error.h"
#include "core/safe_files.h"
#include "dtensor/random.h"

namespace vescale {
namespace fs = std::filesystem;
using detail::commit;
using detail::full_piece;
using detail::link_aliases;
using detail::prepare_folder;
using detail::stamp_dataset_count;
using detail::write_meta;
using detail::write_piece;

namespace {

/// A copy in host memory that training cannot change (a clone on the CPU).
at::Tensor host_copy(const at::Tensor& t) {
  return t.detach().to(at::kCPU, t.scalar_type(), /*non_blocking=*/false, /*copy=*/true,
                       at::MemoryFormat::Contiguous);
}

/// A rank's piece of `t`, a copy in host memory when `copy`, else `t`'s own local tensor.
SavedPiece shard_piece(const StateTensor& t, int64_t replica_id, bool copy) {
  return {t.name,
          copy ? host_copy(t.local) : t.local.detach(),
          t.spec.shape,
          t.spec.local_offset(),
          placements_str(t.spec.placements),
          t.spec.mesh.shape(),
          fmt::format("{}", fmt::join(t.spec.mesh.dim_names(), ",")),
          replica_id};
}

/// This rank's pieces of a sharded or deduped checkpoint (copies in host memory when `copy`).
std::vector<SavedPiece> rank_pieces(CheckpointFormat format, const std::vector<StateTensor>& state,
                                    bool copy) {
  std::vector<SavedPiece> pieces;
  for (const auto& t : state) {
    VS_CHECK(!t.spec.has_partial(), "[checkpoint] {} is Partial ({}): reduce it first", t.name,
             t.spec.str());
    std::vector<int> split = t.spec.split_dims();
    split.insert(split.end(), t.held_along.begin(), t.held_along.end());
    const Replica replica = t.spec.mesh.replica(split);
    if (format == CheckpointFormat::kDeduped) {
      // One writer per unique piece, spread over its replicas by name.
      const int64_t writer =
          static_cast<int64_t>(stream_id(t.name) % static_cast<uint64_t>(replica.count));
      if (replica.index != writer || t.local.numel() == 0) continue;
    }
    pieces.push_back(shard_piece(t, replica.index, copy));
  }
  return pieces;
}

/// rank-XXXXX.h5 of a sharded or deduped checkpoint: written under a temporary name, synced to
/// disk and renamed.
void write_rank_file(const fs::path& folder, int rank, const CheckpointMeta& meta,
                     const std::map<std::string, std::string>& aliases,
                     const std::vector<SavedPiece>& pieces) {
  const fs::path final_path = folder / fmt::format("rank-{:05d}.h5", rank);
  const fs::path tmp = final_path.string() + ".tmp";
  remove_stale(tmp);
  {
    h5::File file = h5::File::create(tmp.string());
    write_meta(file, meta);
    file.make_group("/model");
    for (const auto& p : pieces)
      write_piece(file, p);
    link_aliases(file, aliases);
    stamp_dataset_count(file);
    file.close();
  }
  sync_to_disk(tmp);
  fs::rename(tmp, final_path);
}

/// The names of the mesh dims along which `t` differs between ranks besides its shards.
std::vector<std::string> own_held(const StateTensor& t) {
  std::vector<std::string> names;
  for (int d : t.held_along)
    names.push_back(t.spec.mesh.dim_names()[static_cast<size_t>(d)]);
  return names;
}

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

/// The names of the mesh dims along which some of `state` differs between ranks besides its
/// shards: every tensor's held_along (the stages; an expert's holders). By name: the tensors'
/// meshes may order their dims differently (ZeRO's pieces put the replica dims last).
std::vector<std::string> held_dims(const std::vector<StateTensor>& state) {
  std::vector<std::string> names;
  for (const auto& t : state) {
    for (const auto& name : own_held(t))
      if (!contains(names, name)) names.push_back(name);
  }
  return names;
}

/// The rank that writes this rank's tensors to a merged file: the first replica of the ranks
/// holding the same tensors (differing only along held_dims()); rank 0 without a pipeline or
/// experts.
int merged_writer_rank(const std::vector<StateTensor>& state, const comm::Group& world) {
  if (state.empty()) return world.rank();
  const DeviceMesh& mesh = state.front().spec.mesh;
  const std::vector<std::string> held = held_dims(state);
  std::vector<int64_t> coord = mesh.coordinate();
  for (int d = 0; d < mesh.ndim(); ++d) {
    if (!contains(held, mesh.dim_names()[static_cast<size_t>(d)])) coord[d] = 0;
  }
  return mesh.rank_at(coord);
}

/// Whether this rank's merged writer writes `t`: the writers of ranks that hold other tensors
/// along `held` (held_dims()) also hold `t` when `t` does not differ along all of them (a layer's
/// router beside its experts); the first of them writes it. Every rank of one writer agrees.
bool merged_writes(const StateTensor& t, const std::vector<std::string>& held) {
  const std::vector<int64_t> coord = t.spec.mesh.coordinate();
  const std::vector<std::string> own = own_held(t);
  for (const auto& name : held) {
    if (!contains(own, name) && coord[static_cast<size_t>(t.spec.mesh.dim_index(name))] != 0)
      return false;
  }
  return true;
}

/// Whether some tensor of `state` is split over a dim along which other tensors differ (ZeRO's
/// pieces of a dense parameter over dp x ep, beside experts that differ along ep): its gather
/// spans the ranks of several merged writers, so it cannot wait for one writer's turn.
bool gathers_across_writers(const std::vector<StateTensor>& state) {
  const std::vector<std::string> held = held_dims(state);
  for (const auto& t : state) {
    const std::vector<std::string> own = own_held(t);
    for (int d : t.spec.split_dims()) {
      const std::string name = t.spec.mesh.dim_names()[static_cast<size_t>(d)];
      if (!contains(own, name) && contains(held, name)) return true;
    }
  }
  return false;
}

/// Hands each of this rank's full tensors to a sink (the merged file, or a snapshot).
using PieceSource = std::function<void(const std::function<void(SavedPiece)>&)>;

/// model.h5: the writers add their tensors in rank order, each in its turn (rank 0 first, which
/// creates the file), while the ranks whose tensors they write take part in producing them; rank
/// 0 then links the aliases, syncs the file to disk and renames it. *Collective* over `group`.
void write_merged_file(const fs::path& folder, const CheckpointMeta& meta,
                       const std::map<std::string, std::string>& aliases, const comm::Group& group,
                       int writer_rank, const PieceSource& pieces) {
  const fs::path final_path = folder / "model.h5";
  const fs::path tmp = final_path.string() + ".tmp";
  for (int turn = 0; turn < group.size(); ++turn) {
    if (turn == writer_rank) {
      std::optional<h5::File> file;
      if (group.rank() == writer_rank) {
        if (turn == 0) remove_stale(tmp);
        file = turn == 0 ? h5::File::create(tmp.string()) : h5::File::open_for_append(tmp.string());
        if (turn == 0) write_meta(*file, meta);
      }
      pieces([&](SavedPiece p) {
        if (file) write_piece(*file, p);
      });
      if (file) file->close();
    }
    group.barrier();
  }
  if (group.rank() == 0) {
    {
      h5::File file = h5::File::open_for_append(tmp.string());
      link_aliases(file, aliases);
      stamp_dataset_count(file);
      file.close();
    }
    sync_to_disk(tmp);
    fs::rename(tmp, final_path);
  }
}

}  // namespace

std::string save_checkpoint(const std::string& dir, CheckpointFormat format,
                            const std::vector<StateTensor>& state,
                            const std::map<std::string, std::string>& aliases,
                            const CheckpointMeta& meta_in, const comm::Group& world, int64_t keep) {
  torch::autograd::AutoGradMode no_grad(false);
  if (format == CheckpointFormat::kMerged && gathers_across_writers(state)) {
    // Every tensor gathered by all ranks at once, then written in the writers' turns.
    const CheckpointSnapshot s =
        snapshot_checkpoint(dir, format, state, aliases, meta_in, world, keep);
    write_snapshot(s, world);
    return s.folder;
  }
  CheckpointMeta meta = meta_in;
  meta.format = checkpoint_format_name(format);
  const fs::path folder = prepare_folder(dir, meta, world);
  if (format == CheckpointFormat::kMerged) {
    // One full tensor at a time, written as soon as it is gathered: rank 0 never holds the
    // gathered state besides its own shards.
    write_merged_file(folder, meta, aliases, world, merged_writer_rank(state, world),
                      [&](const std::function<void(SavedPiece)>& sink) {
                        const std::vector<std::string> held = held_dims(state);
                        for (const auto& t : state) {
                          if (merged_writes(t, held))
                            sink(full_piece(t.name, DTensor(t.local, t.spec).full_tensor()));
                        }
                      });
  } else {
    write_rank_file(folder, world.rank(), meta, aliases, rank_pieces(format, state, false));
  }
  commit(dir, folder, meta, keep, world);
  return folder.string();
}

int64_t CheckpointSnapshot::bytes() const {
  int64_t total = 0;
  for (const auto& p : pieces)
    total += static_cast<int64_t>(p.tensor.nbytes());
  return total;
}

CheckpointSnapshot snapshot_checkpoint(const std::string& dir, CheckpointFormat format,
                                       const std::vector<StateTensor>& state,
                                       const std::map<std::string, std::string>& aliases,
                                       const CheckpointMeta& meta, const comm::Group& world,
                                       int64_t keep) {
  torch::autograd::AutoGradMode no_grad(false);
  CheckpointSnapshot s;
  s.dir = dir;
  s.format = format;
  s.meta = meta;
  s.meta.format = checkpoint_format_name(format);
  s.aliases = aliases;
  s.keep = keep;
  s.folder = prepare_folder(dir, s.meta, world).string();
  s.writer_rank = world.rank();
  if (format == CheckpointFormat::kMerged) {
    // The writer keeps each gathered tensor (the one copy of the state it holds); a tensor the
    // gather did not copy (replicated, or a group of one) is the live one and is copied.
    s.writer_rank = merged_writer_rank(state, world);
    const std::vector<std::string> held = held_dims(state);
    for (const auto& t : state) {
      // Gathered by every rank that holds a piece, kept by its writer.
      at::Tensor full = DTensor(t.local, t.spec).full_tensor();
      if (s.writer_rank != world.rank() || !merged_writes(t, held)) continue;
      if (full.is_alias_of(t.local) || !full.is_cpu()) full = host_copy(full);
      s.pieces.push_back(full_piece(t.name, full.detach()));
    }
  } else {
    s.pieces = rank_pieces(format, state, true);
  }
  return s;
}

void write_snapshot(const CheckpointSnapshot& s, const comm::Group& group) {
  const fs::path folder = s.folder;
  if (s.format == CheckpointFormat::kMerged) {
    write_merged_file(folder, s.meta, s.aliases, group, s.writer_rank,
                      [&](const std::function<void(SavedPiece)>& sink) {
                        for (const auto& p : s.pieces)
                          sink(p);
                      });
  } else {
    write_rank_file(folder, group.rank(), s.meta, s.aliases, s.pieces);
  }
  commit(s.dir, folder, s.meta, s.keep, group);
}

int64_t folder_bytes(const std::string& folder) {
  int64_t total = 0;
  for (const auto& e : fs::directory_iterator(folder)) {
    if (e.is_regular_file()) total += static_cast<int64_t>(e.file_size());
  }
  return total;
}

}  // namespace vescale
