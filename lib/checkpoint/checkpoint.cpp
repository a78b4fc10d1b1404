#include "checkpoint/checkpoint.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <optional>
#include <sstream>

#include "checkpoint/checksums.h"
#include "checkpoint/crc32c.h"
#include "checkpoint/safe_files.h"
#include "checkpoint/step_folders.h"
#include "core/error.h"
#include "core/logging.h"

#include <spdlog/spdlog.h>
#include "dtensor/random.h"

namespace vescale {
namespace fs = std::filesystem;
namespace {

/// Bounds of what a checkpoint's metadata may say, checked before anything is allocated from it.
constexpr int64_t kMaxWorldSize = int64_t{1} << 20;
constexpr int64_t kMaxTensorElements = int64_t{1} << 40;

void write_meta(h5::File& file, const CheckpointMeta& m) {
  file.make_group("/meta");
  file.set_attr("/meta", "format_version", kCheckpointFormatVersion);
  file.set_attr("/meta", "format", m.format);
  file.set_attr("/meta", "step", m.step);
  file.set_attr("/meta", "run_id", m.run_id);
  file.set_attr("/meta", "data_position", m.step);
  file.set_attr("/meta", "rng_seed", m.seed);
  file.set_attr("/meta", "rng_counter", m.step);
  file.set_attr("/meta", "optimizer_steps", m.optimizer_steps);
  file.set_attr("/meta", "config", m.config);
  file.set_attr("/meta", "plan", m.plan);
  file.set_attr("/meta", "world_size", m.world_size);
  file.set_attr("/meta", "mesh_shape", m.mesh_shape);
  file.set_attr("/meta", "mesh_dims", fmt::format("{}", fmt::join(m.mesh_dims, ",")));
}

CheckpointMeta read_meta(const h5::File& file) {
  VS_USER_CHECK(file.exists("/meta"),
                "[checkpoint] {} has no /meta: not a vescale-train checkpoint", file.path());
  const int64_t version = file.attr_int("/meta", "format_version");
  VS_USER_CHECK(version >= 1, "[checkpoint] {}: format version {} is not one vescale-train wrote",
                file.path(), version);
  VS_USER_CHECK(
      version <= kCheckpointFormatVersion,
      "[checkpoint] {} has format version {}, newer than this vescale-train reads ({}): upgrade "
      "vescale-train",
      file.path(), version, kCheckpointFormatVersion);
  CheckpointMeta m;
  m.format_version = version;
  m.format = file.attr_string("/meta", "format");
  // Version 1 files have no run id: "" (any run).
  if (version >= 2) {
    m.run_id = file.attr_string("/meta", "run_id");
    // Empty: a merged file made from a version 1 checkpoint (its run is unknown).
    VS_USER_CHECK(
        m.run_id.empty() || (m.run_id.size() == 16 &&
                             m.run_id.find_first_not_of("0123456789abcdef") == std::string::npos),
        "[checkpoint] {}: /meta run_id '{}' is not 16 hex digits", file.path(), m.run_id);
  }
  m.step = file.attr_int("/meta", "step");
  m.seed = file.attr_int("/meta", "rng_seed");
  m.optimizer_steps = file.attr_int("/meta", "optimizer_steps");
  m.config = file.attr_string("/meta", "config");
  m.plan = file.attr_string("/meta", "plan");
  m.world_size = file.attr_int("/meta", "world_size");
  m.mesh_shape = file.attr_ints("/meta", "mesh_shape");
  std::stringstream dims(file.attr_string("/meta", "mesh_dims"));
  for (std::string d; std::getline(dims, d, ',');)
    m.mesh_dims.push_back(d);
  VS_USER_CHECK(m.step >= 0, "[checkpoint] {}: /meta step is {}; a step is never negative",
                file.path(), m.step);
  VS_USER_CHECK(m.world_size >= 1 && m.world_size <= kMaxWorldSize,
                "[checkpoint] {}: /meta world_size is {}, outside [1, {}]", file.path(),
                m.world_size, kMaxWorldSize);
  VS_USER_CHECK(m.format == "sharded" || m.format == "deduped" || m.format == "merged",
                "[checkpoint] {}: /meta format is '{}', not sharded, deduped or merged",
                file.path(), m.format);
  return m;
}

/// Throws unless every file of one checkpoint says it is of the same run, step and world size.
void check_same_checkpoint(const h5::File& file, const CheckpointMeta& m,
                           const CheckpointMeta& first, const std::string& first_path) {
  VS_USER_CHECK(m.run_id == first.run_id && m.step == first.step &&
                    m.world_size == first.world_size && m.format == first.format,
                "[checkpoint] {} is not part of the checkpoint of {}: it says run '{}', step {}, "
                "{} ranks, {}, but {} says run '{}', step {}, {} ranks, {} (a rank file copied "
                "from another run or step?)",
                file.path(), first_path, m.run_id, m.step, m.world_size, m.format, first_path,
                first.run_id, first.step, first.world_size, first.format);
}

void write_piece(h5::File& file, const SavedPiece& p) {
  const std::string path = "/" + p.name;
  write_checksummed(file, path, p.tensor);
  file.set_attr(path, "global_shape", p.global_shape);
  file.set_attr(path, "global_offset", p.global_offset);
  file.set_attr(path, "placements", p.placements);
  file.set_attr(path, "mesh_shape", p.mesh_shape);
  file.set_attr(path, "mesh_dims", p.mesh_dims);
  file.set_attr(path, "replica_id", p.replica_id);
}

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

/// A full tensor of a merged file, with the attributes of a single piece covering it all.
SavedPiece full_piece(const std::string& name, at::Tensor full) {
  std::vector<int64_t> shape = full.sizes().vec();
  std::vector<int64_t> offset(shape.size(), 0);
  return {name, std::move(full), std::move(shape), std::move(offset), "merged", {1}, "merged", 0};
}

/// Tensors under /model and /optimizer: what the file holds (a hard link counts once).
int64_t count_datasets(const h5::File& file) {
  return static_cast<int64_t>(file.datasets("/model").size() + file.datasets("/optimizer").size());
}

/// CRC-32C of the file's tensor names ("model/...", "optimizer/..."), sorted, one per line: a
/// byte flipped in a name changes it (the data's own checksums cannot see a renamed tensor).
int64_t names_checksum(const h5::File& file) {
  std::vector<std::string> names;
  for (const std::string group : {"model", "optimizer"}) {
    for (const auto& rel : file.datasets("/" + group))
      names.push_back(group + "/" + rel);
  }
  std::sort(names.begin(), names.end());
  uint32_t crc = 0;
  for (const auto& name : names) {
    crc = crc32c(name.data(), name.size(), crc);
    crc = crc32c("\n", 1, crc);
  }
  return static_cast<int64_t>(crc);
}

/// /meta "datasets": how many tensors the writer put in the file, so a reader finds a dataset
/// that damage hid from the listing (it would otherwise look like a missing piece); and
/// "names_crc32c", the checksum of their names (names_checksum).
void stamp_dataset_count(h5::File& file) {
  file.set_attr("/meta", "datasets", count_datasets(file));
  file.set_attr("/meta", "names_crc32c", names_checksum(file));
}

/// Hard links for tied names, listed in /meta "aliases" as "alias=target;..." (a hard link has
/// no direction: the list says which name is the parameter's own).
void link_aliases(h5::File& file, const std::map<std::string, std::string>& aliases) {
  std::string listed;
  for (const auto& [alias, target] : aliases) {
    if (!file.exists("/" + target)) continue;
    file.hard_link("/" + target, "/" + alias);
    listed += alias + "=" + target + ";";
  }
  file.set_attr("/meta", "aliases", listed);
}

/// A checkpoints folder, ".../latest" or a dump folder (its checkpoints/): its newest committed
/// step folder, skipping (with a warning) step folders a crash left without COMMIT. Any other
/// path as it is.
fs::path resolve_latest(fs::path path) {
  if (path.filename() == "latest") path = path.parent_path();
  if (!fs::is_directory(path) || fs::exists(path / "COMMIT") ||
      fs::is_regular_file(path / "model.h5")) {
    return path;
  }
  std::vector<StepFolder> steps = list_step_folders(path);  // by step number
  if (steps.empty() && fs::is_directory(checkpoints_folder(path))) {
    path = checkpoints_folder(path);  // a dump folder
    steps = list_step_folders(path);
    VS_USER_CHECK(!steps.empty(), "[checkpoint] {}: no checkpoint saved yet (no step folder)",
                  path.string());
  }
  if (steps.empty()) return path;
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    if (it->committed) return it->path;
    spdlog::warn("[checkpoint] ignoring {}: it has no COMMIT (saving did not finish)",
                 it->path.string());
  }
  throw UserError(fmt::format(
      "[checkpoint] {}: no committed checkpoint (no step folder with COMMIT)", path.string()));
}

/// The .h5 files of a checkpoint, sorted: a merged file itself, or those of a committed step.
std::vector<fs::path> checkpoint_files(const fs::path& path) {
  if (fs::is_regular_file(path)) return {path};
  VS_USER_CHECK(fs::is_directory(path),
                "[checkpoint] {}: no such checkpoint (a step folder, a merged .h5, or a "
                "checkpoints folder with 'latest')",
                path.string());
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(path)) {
    if (e.path().extension() == ".h5") files.push_back(e.path());
  }
  VS_USER_CHECK(fs::exists(path / "COMMIT") || !files.empty(),
                "[checkpoint] {}: not a checkpoint (give a step folder, a checkpoints folder, a "
                "dump folder or a merged .h5)",
                path.string());
  VS_USER_CHECK(fs::exists(path / "COMMIT"),
                "[checkpoint] {} has no COMMIT: it was not finished (a crash while saving?); use "
                "an earlier step",
                path.string());
  std::sort(files.begin(), files.end());
  VS_USER_CHECK(!files.empty(), "[checkpoint] {} holds no .h5 files", path.string());
  return files;
}

/// Throws unless a piece's attributes are in range: a global shape of non-negative dims and at most
/// kMaxTensorElements elements, and the piece (offset, extent) inside it.
void check_piece(const std::string& file, const std::string& dataset,
                 const std::vector<int64_t>& global_shape, const std::vector<int64_t>& offset,
                 const std::vector<int64_t>& extent) {
  VS_USER_CHECK(global_shape.size() == extent.size() && offset.size() == extent.size(),
                "[checkpoint] {}: tensor {} has {} dims but its global_shape has {} and its "
                "global_offset {}",
                file, dataset, extent.size(), global_shape.size(), offset.size());
  int64_t elements = 1;
  for (size_t d = 0; d < extent.size(); ++d) {
    VS_USER_CHECK(global_shape[d] >= 0 && global_shape[d] <= kMaxTensorElements &&
                      (global_shape[d] == 0 || elements <= kMaxTensorElements / global_shape[d]),
                  "[checkpoint] {}: tensor {} has global_shape [{}]: a negative dim, or over {} "
                  "elements",
                  file, dataset, fmt::join(global_shape, ", "), kMaxTensorElements);
    elements *= global_shape[d];
    VS_USER_CHECK(
        offset[d] >= 0 && offset[d] <= global_shape[d] && extent[d] <= global_shape[d] - offset[d],
        "[checkpoint] {}: tensor {} is a piece [{}] at global_offset [{}], outside its "
        "global_shape [{}]",
        file, dataset, fmt::join(extent, ", "), fmt::join(offset, ", "),
        fmt::join(global_shape, ", "));
  }
}

/// Throws unless a sharded or deduped step folder holds the file of every rank that wrote it.
void check_rank_files(const fs::path& path, const CheckpointMeta& meta) {
  if (meta.format == "merged") return;
  std::vector<std::string> missing;
  for (int64_t r = 0; r < meta.world_size; ++r) {
    if (!fs::exists(path / fmt::format("rank-{:05d}.h5", r)))
      missing.push_back(fmt::format("rank-{:05d}.h5", r));
  }
  VS_USER_CHECK(missing.empty(), "[checkpoint] {}: written by {} ranks but {} missing",
                path.string(), meta.world_size, fmt::join(missing, ", "));
  for (const auto& e : fs::directory_iterator(path)) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() != ".h5") continue;
    // "rank-" then digits then ".h5", naming a rank below world_size.
    const std::string digits =
        name.substr(std::min<size_t>(5, name.size()), name.size() >= 8 ? name.size() - 8 : 0);
    const bool numeric = !digits.empty() && digits.size() <= 9 &&
                         digits.find_first_not_of("0123456789") == std::string::npos;
    const int64_t rank = numeric ? std::stoll(digits) : -1;
    VS_USER_CHECK(numeric && rank < meta.world_size && name == fmt::format("rank-{:05d}.h5", rank),
                  "[checkpoint] {}: {} is not the file of one of the {} ranks that wrote it (a "
                  "file from another run?)",
                  path.string(), name, meta.world_size);
  }
}

/// Rank 0 creates <dir>/step-XXXXXX (refusing a committed one); every rank waits for it.
fs::path prepare_folder(const std::string& dir, const CheckpointMeta& meta,
                        const comm::Group& world) {
  const fs::path folder = fs::path(dir) / step_folder_name(meta.step);
  if (world.rank() == 0) {
    VS_USER_CHECK(!fs::exists(folder / "COMMIT"),
                  "[checkpoint] {} is already committed; not overwriting it", folder.string());
    // An uncommitted folder of this step is a save a crash cut short: start it afresh, so no
    // file of that attempt (a rank file of another world size) outlives it.
    if (path_taken(folder)) remove_stale(folder);
    make_folder(folder);
  }
  world.barrier();
  return folder;
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

/// The rank that writes this rank's tensors to a merged file: the first replica of the ranks
/// holding the same tensors (differing only along `held_along`); rank 0 without a pipeline.
int merged_writer_rank(const std::vector<StateTensor>& state, const comm::Group& world) {
  if (state.empty()) return world.rank();
  const DeviceMesh& mesh = state.front().spec.mesh;
  const auto& held = state.front().held_along;
  std::vector<int64_t> coord = mesh.coordinate();
  for (int d = 0; d < mesh.ndim(); ++d) {
    if (std::find(held.begin(), held.end(), d) == held.end()) coord[d] = 0;
  }
  return mesh.rank_at(coord);
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

/// Once every rank's files are complete: COMMIT, then `latest`, then pruning to the newest `keep`
/// committed steps (rank 0). *Collective* over `group`.
void commit(const fs::path& dir, const fs::path& folder, const CheckpointMeta& meta, int64_t keep,
            const comm::Group& group) {
  group.barrier();
  if (group.rank() == 0) {
    sync_to_disk(folder);  // the renames of the files into it
    write_text_atomically(folder / "COMMIT",
                          fmt::format("step {}\nformat {}\n", meta.step, meta.format));
    write_text_atomically(dir / "latest", step_folder_name(meta.step) + "\n");
    if (keep > 0) {
      const std::vector<StepFolder> committed = committed_step_folders(dir);  // by step number
      for (size_t i = 0; i + static_cast<size_t>(keep) < committed.size(); ++i)
        remove_step_folder(committed[i].path);
    }
  }
  group.barrier();
}

}  // namespace

CheckpointFormat parse_checkpoint_format(const std::string& text) {
  if (text == "sharded") return CheckpointFormat::kSharded;
  if (text == "deduped") return CheckpointFormat::kDeduped;
  if (text == "merged") return CheckpointFormat::kMerged;
  throw UserError(fmt::format("checkpoint.format = \"{}\": use sharded, deduped or merged", text));
}

const char* checkpoint_format_name(CheckpointFormat format) {
  switch (format) {
    case CheckpointFormat::kSharded:
      return "sharded";
    case CheckpointFormat::kDeduped:
      return "deduped";
    case CheckpointFormat::kMerged:
      return "merged";
  }
  return "?";
}

std::string save_checkpoint(const std::string& dir, CheckpointFormat format,
                            const std::vector<StateTensor>& state,
                            const std::map<std::string, std::string>& aliases,
                            const CheckpointMeta& meta_in, const comm::Group& world, int64_t keep) {
  torch::autograd::AutoGradMode no_grad(false);
  CheckpointMeta meta = meta_in;
  meta.format = checkpoint_format_name(format);
  const fs::path folder = prepare_folder(dir, meta, world);
  if (format == CheckpointFormat::kMerged) {
    // One full tensor at a time, written as soon as it is gathered: rank 0 never holds the
    // gathered state besides its own shards.
    write_merged_file(folder, meta, aliases, world, merged_writer_rank(state, world),
                      [&](const std::function<void(SavedPiece)>& sink) {
                        for (const auto& t : state)
                          sink(full_piece(t.name, DTensor(t.local, t.spec).full_tensor()));
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
    for (const auto& t : state) {
      at::Tensor full = DTensor(t.local, t.spec).full_tensor();
      if (s.writer_rank != world.rank()) continue;
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

CheckpointReader::CheckpointReader(const std::string& path_in) {
  const fs::path path = resolve_latest(path_in);
  path_ = path.string();
  for (const auto& f : checkpoint_files(path))
    files_.push_back(std::make_unique<h5::File>(h5::File::open(f.string())));
  for (const auto& file : files_) {
    const CheckpointMeta m = read_meta(*file);  // checks the format version and ranges
    if (file == files_.front()) meta_ = m;
    check_same_checkpoint(*file, m, meta_, files_[0]->path());
    checksummed_.push_back(m.format_version >= 2);
    if (m.format_version < 2) {
      spdlog::warn(
          "[checkpoint] {} has format version {}: its tensors carry no checksums and are "
          "not verified",
          file->path(), m.format_version);
    }
  }
  VS_USER_CHECK(!fs::is_regular_file(path) || meta_.format == "merged",
                "[checkpoint] {}: one rank's file of a {} checkpoint written by {} ranks; give "
                "its step folder {}",
                path.string(), meta_.format, meta_.world_size, path.parent_path().string());
  check_rank_files(path, meta_);
  index_pieces();
  read_aliases();
}

void CheckpointReader::index_pieces() {
  for (size_t f = 0; f < files_.size(); ++f) {
    int64_t listed = 0;
    for (const std::string group : {"/model", "/optimizer"}) {
      for (const auto& rel : files_[f]->datasets(group)) {
        ++listed;
        const std::string name = group.substr(1) + "/" + rel;
        const std::string dataset = group + "/" + rel;
        const auto shape = files_[f]->attr_ints(dataset, "global_shape");
        Piece piece{f, dataset, files_[f]->attr_ints(dataset, "global_offset"),
                    files_[f]->shape(dataset)};
        check_piece(files_[f]->path(), dataset, shape, piece.offsets, piece.sizes);
        // A damaged attribute shows here: name both files, as every other damage error does.
        auto it = shapes_.find(name);
        VS_USER_CHECK(it == shapes_.end() || it->second == shape,
                      "[checkpoint] {}: tensor {} has global shape [{}] in {} but [{}] in {}: one "
                      "of the files is damaged",
                      path_, name, fmt::join(it->second, ", "),
                      files_[pieces_[name].front().file]->path(), fmt::join(shape, ", "),
                      files_[f]->path());
        shapes_[name] = shape;
        placements_[name] = files_[f]->attr_string(dataset, "placements");
        pieces_[name].push_back(piece);
      }
    }
    // Damage can hide a dataset from the listing; it would otherwise look like a missing piece.
    if (files_[f]->has_attr("/meta", "datasets")) {
      const int64_t written = files_[f]->attr_int("/meta", "datasets");
      VS_USER_CHECK(listed == written,
                    "[checkpoint] {} lists {} tensors but was written with {}: the file is damaged",
                    files_[f]->path(), listed, written);
    }
    if (files_[f]->has_attr("/meta", "names_crc32c")) {
      VS_USER_CHECK(names_checksum(*files_[f]) == files_[f]->attr_int("/meta", "names_crc32c"),
                    "[checkpoint] {}: its tensor names are not those it was written with (their "
                    "checksum differs): the file is damaged",
                    files_[f]->path());
    }
  }
  // Pieces overlap only as replicas, so a whole tensor holds at most as many elements as its
  // pieces together: a global shape past that (damaged metadata, a missing rank file) is refused
  // before a tensor of that shape is allocated.
  for (const auto& [name, pieces] : pieces_) {
    double held = 0;
    for (const auto& p : pieces)
      held += std::accumulate(p.sizes.begin(), p.sizes.end(), 1.0, std::multiplies<double>());
    const auto& shape = shapes_.at(name);
    const double whole =
        std::accumulate(shape.begin(), shape.end(), 1.0, std::multiplies<double>());
    VS_USER_CHECK(
        whole <= held,
        "[checkpoint] {}: tensor {} has global shape [{}] ({} elements) but its pieces in "
        "{} hold only {}: a damaged file or a missing rank file",
        path_, name, fmt::join(shape, ", "), whole, fmt::join(files(), ", "), held);
  }
}

at::Tensor CheckpointReader::read_piece(const Piece& p, const std::vector<int64_t>& in_piece,
                                        const std::vector<int64_t>& count) const {
  const h5::File& file = *files_[p.file];
  if (!verified_.insert({p.file, p.dataset}).second)
    return file.read_box(p.dataset, in_piece, count);
  at::Tensor chunk = read_verified(file, p.dataset, checksummed_[p.file]);
  for (size_t d = 0; d < count.size(); ++d)
    chunk = chunk.narrow(static_cast<int64_t>(d), in_piece[d], count[d]);
  return chunk;
}

std::vector<std::string> CheckpointReader::verify(int64_t* checked) const {
  std::vector<std::string> bad;
  int64_t n = 0;
  for (size_t f = 0; f < files_.size(); ++f) {
    for (const std::string group : {"/model", "/optimizer"}) {
      for (const auto& rel : files_[f]->datasets(group)) {
        ++n;
        const std::string wrong = verify_dataset(*files_[f], group + "/" + rel, checksummed_[f]);
        if (!wrong.empty()) bad.push_back(wrong);
      }
    }
  }
  if (checked) *checked = n;
  return bad;
}

void CheckpointReader::read_aliases() {
  for (const auto& file : files_) {
    if (!file->has_attr("/meta", "aliases")) continue;
    std::stringstream list(file->attr_string("/meta", "aliases"));
    for (std::string item; std::getline(list, item, ';');) {
      const size_t eq = item.find('=');
      if (eq != std::string::npos) aliases_[item.substr(0, eq)] = item.substr(eq + 1);
    }
  }
  // A file visit sees a hard-linked dataset once, under either name: file it under the target.
  for (const auto& [alias, target] : aliases_) {
    auto it = pieces_.find(alias);
    if (it == pieces_.end()) continue;
    if (!pieces_.count(target)) {
      pieces_[target] = it->second;
      shapes_[target] = shapes_[alias];
      placements_[target] = placements_[alias];
    }
    pieces_.erase(alias);
  }
}

std::vector<std::string> CheckpointReader::names() const {
  std::vector<std::string> out;
  for (const auto& entry : pieces_) {
    if (!aliases_.count(entry.first)) out.push_back(entry.first);
  }
  return out;
}

std::vector<int64_t> CheckpointReader::global_shape(const std::string& name) const {
  auto it = shapes_.find(name);
  VS_USER_CHECK(it != shapes_.end(), "[checkpoint] {}: no tensor {}", path_, name);
  return it->second;
}

at::ScalarType CheckpointReader::dtype(const std::string& name) const {
  auto it = pieces_.find(name);
  VS_USER_CHECK(it != pieces_.end(), "[checkpoint] {}: no tensor {}", path_, name);
  return files_[it->second[0].file]->dtype(it->second[0].dataset);
}

std::string CheckpointReader::placements(const std::string& name) const {
  auto it = placements_.find(name);
  return it == placements_.end() ? "" : it->second;
}

at::Tensor CheckpointReader::read_box(const std::string& name, const std::vector<int64_t>& offsets,
                                      const std::vector<int64_t>& sizes) const {
  auto it = pieces_.find(name);
  VS_USER_CHECK(it != pieces_.end(),
                "[checkpoint] {}: no tensor {} (a checkpoint of another model config?)", path_,
                name);
  at::Tensor out;
  at::Tensor covered = at::zeros(sizes, at::kBool);
  for (const Piece& p : it->second) {
    // The intersection of the wanted box and the piece, per dim.
    std::vector<int64_t> lo(sizes.size()), hi(sizes.size());
    bool empty = false;
    for (size_t d = 0; d < sizes.size(); ++d) {
      lo[d] = std::max(offsets[d], p.offsets[d]);
      hi[d] = std::min(offsets[d] + sizes[d], p.offsets[d] + p.sizes[d]);
      empty = empty || hi[d] <= lo[d];
    }
    if (empty && !sizes.empty()) continue;
    std::vector<int64_t> in_piece(sizes.size()), count(sizes.size());
    for (size_t d = 0; d < sizes.size(); ++d) {
      in_piece[d] = lo[d] - p.offsets[d];
      count[d] = hi[d] - lo[d];
    }
    at::Tensor chunk = read_piece(p, in_piece, count);
    if (!out.defined()) out = at::empty(sizes, chunk.scalar_type());
    at::Tensor dst = out, seen = covered;
    for (size_t d = 0; d < sizes.size(); ++d) {
      dst = dst.narrow(static_cast<int64_t>(d), lo[d] - offsets[d], count[d]);
      seen = seen.narrow(static_cast<int64_t>(d), lo[d] - offsets[d], count[d]);
    }
    dst.copy_(chunk);
    seen.fill_(true);
  }
  if (!out.defined()) out = at::empty(sizes, dtype(name));
  VS_USER_CHECK(
      covered.numel() == 0 || covered.all().item<bool>(),
      "[checkpoint] {}: part of tensor {} is in no file (a missing or incomplete rank file?)",
      path_, name);
  return out;
}

at::Tensor CheckpointReader::read_full(const std::string& name) const {
  const auto shape = global_shape(name);
  return read_box(name, std::vector<int64_t>(shape.size(), 0), shape);
}

int64_t CheckpointReader::bytes_on_disk() const {
  int64_t total = 0;
  for (const auto& f : files_)
    total += static_cast<int64_t>(fs::file_size(f->path()));
  return total;
}

std::vector<std::string> CheckpointReader::files() const {
  std::vector<std::string> out;
  for (const auto& f : files_)
    out.push_back(f->path());
  return out;
}

CheckpointMeta read_checkpoint_meta(const std::string& path) {
  const auto files = checkpoint_files(path);
  return read_meta(h5::File::open(files.front().string()));
}

int64_t merge_checkpoint(const CheckpointReader& reader, const std::string& output,
                         bool model_only) {
  VS_USER_CHECK(!output.empty() && fs::path(output).has_filename(),
                "merge: -o '{}' is not a file name; give the merged file to write, e.g. "
                "-o model.h5",
                output);
  const fs::path folder = fs::absolute(output).parent_path();
  VS_USER_CHECK(fs::is_directory(folder), "merge: -o {}: no folder {} to write it in", output,
                folder.string());
  VS_USER_CHECK(!path_taken(output), "merge: {} exists; not overwriting it", output);
  const std::string tmp = output + ".tmp";
  remove_stale(tmp);
  int64_t written = 0;
  try {
    h5::File file = h5::File::create(tmp);
    CheckpointMeta meta = reader.meta();
    meta.format = "merged";
    write_meta(file, meta);
    for (const auto& name : reader.names()) {
      if (model_only && name.rfind("model/", 0) != 0) continue;
      write_piece(file, full_piece(name, reader.read_full(name)));
      ++written;
    }
    link_aliases(file, reader.aliases());
    stamp_dataset_count(file);
    file.close();
    sync_to_disk(tmp);
    // The output is checked again just before the rename: a link made meanwhile is refused, not
    // replaced (rename itself would replace the link, never write through it).
    VS_USER_CHECK(!path_taken(output), "merge: {} exists; not overwriting it", output);
    fs::rename(tmp, output);
  } catch (...) {
    std::error_code ignored;
    fs::remove(tmp, ignored);  // no half-written file left behind
    throw;
  }
  sync_to_disk(folder);
  return written;
}

}  // namespace vescale
