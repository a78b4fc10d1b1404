#include "checkpoint/checkpoint.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/logging.h"

#include <spdlog/spdlog.h>
#include "dtensor/random.h"

namespace vescale {
namespace fs = std::filesystem;
namespace {

std::string step_folder(int64_t step) {
  return fmt::format("step-{:06d}", step);
}

void write_text_atomically(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp);
    out << text;
    VS_CHECK(out.good(), "[checkpoint] cannot write {}", tmp.string());
  }
  fs::rename(tmp, path);
}

void write_meta(h5::File& file, const CheckpointMeta& m) {
  file.make_group("/meta");
  file.set_attr("/meta", "format_version", kCheckpointFormatVersion);
  file.set_attr("/meta", "format", m.format);
  file.set_attr("/meta", "step", m.step);
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
  VS_USER_CHECK(
      version <= kCheckpointFormatVersion,
      "[checkpoint] {} has format version {}, newer than this vescale-train reads ({}): upgrade "
      "vescale-train",
      file.path(), version, kCheckpointFormatVersion);
  CheckpointMeta m;
  m.format = file.attr_string("/meta", "format");
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
  return m;
}

void write_piece(h5::File& file, const StateTensor& t, int64_t replica_id) {
  const std::string path = "/" + t.name;
  file.write(path, t.local);
  file.set_attr(path, "global_shape", t.spec.shape);
  file.set_attr(path, "global_offset", t.spec.local_offset());
  file.set_attr(path, "placements", placements_str(t.spec.placements));
  file.set_attr(path, "mesh_shape", t.spec.mesh.shape());
  file.set_attr(path, "mesh_dims", fmt::format("{}", fmt::join(t.spec.mesh.dim_names(), ",")));
  file.set_attr(path, "replica_id", replica_id);
}

/// Hard links for tied names, listed in /meta "aliases" as "alias=target;..." (a hard link has
/// no direction: the list says which name is the parameter's own).
/// A full tensor of a merged file, with the attributes of a single piece covering it all.
void write_full(h5::File& file, const std::string& name, const at::Tensor& full) {
  const std::string path = "/" + name;
  file.write(path, full);
  file.set_attr(path, "global_shape", full.sizes().vec());
  file.set_attr(path, "global_offset", std::vector<int64_t>(full.dim(), 0));
  file.set_attr(path, "placements", std::string("merged"));
  file.set_attr(path, "mesh_shape", std::vector<int64_t>{1});
  file.set_attr(path, "mesh_dims", std::string("merged"));
  file.set_attr(path, "replica_id", int64_t{0});
}

void link_aliases(h5::File& file, const std::map<std::string, std::string>& aliases) {
  std::string listed;
  for (const auto& [alias, target] : aliases) {
    if (!file.exists("/" + target)) continue;
    file.hard_link("/" + target, "/" + alias);
    listed += alias + "=" + target + ";";
  }
  file.set_attr("/meta", "aliases", listed);
}

/// A checkpoints folder or ".../latest": its newest committed step folder, skipping (with a
/// warning) step folders a crash left without COMMIT. Any other path as it is.
fs::path resolve_latest(fs::path path) {
  if (path.filename() == "latest") path = path.parent_path();
  if (!fs::is_directory(path) || fs::exists(path / "COMMIT") ||
      fs::is_regular_file(path / "model.h5")) {
    return path;
  }
  std::vector<fs::path> steps;
  for (const auto& e : fs::directory_iterator(path)) {
    if (e.is_directory() && e.path().filename().string().rfind("step-", 0) == 0)
      steps.push_back(e.path());
  }
  if (steps.empty()) return path;
  std::sort(steps.begin(), steps.end());
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    if (fs::exists(*it / "COMMIT")) return *it;
    spdlog::warn("[checkpoint] ignoring {}: it has no COMMIT (saving did not finish)",
                 it->string());
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
  VS_USER_CHECK(fs::exists(path / "COMMIT"),
                "[checkpoint] {} has no COMMIT: it was not finished (a crash while saving?); use "
                "an earlier step",
                path.string());
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(path)) {
    if (e.path().extension() == ".h5") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  VS_USER_CHECK(!files.empty(), "[checkpoint] {} holds no .h5 files", path.string());
  return files;
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
  const fs::path folder = fs::path(dir) / step_folder(meta.step);
  if (world.rank() == 0) {
    VS_USER_CHECK(!fs::exists(folder / "COMMIT"),
                  "[checkpoint] {} is already committed; not overwriting it", folder.string());
    fs::create_directories(folder);
  }
  world.barrier();

  auto write_file = [&](const std::string& name, const std::function<void(h5::File&)>& fill) {
    const fs::path final_path = folder / name;
    const std::string tmp = final_path.string() + ".tmp";
    {
      h5::File file = h5::File::create(tmp);
      write_meta(file, meta);
      fill(file);
      link_aliases(file, aliases);
    }
    fs::rename(tmp, final_path);
  };
  if (format == CheckpointFormat::kMerged) {
    std::vector<at::Tensor> full;
    for (const auto& t : state)
      full.push_back(DTensor(t.local, t.spec).full_tensor());
    // The writers: the first replica of each set of tensors (rank 0 alone without a pipeline),
    // in rank order, each adding its tensors to the one file.
    const bool writer =
        state.empty() || state.front().spec.mesh.replica(state.front().held_along).index == 0;
    const fs::path final_path = folder / "model.h5";
    const std::string tmp = final_path.string() + ".tmp";
    for (int turn = 0; turn < world.size(); ++turn) {
      if (turn == world.rank() && writer) {
        h5::File file = turn == 0 ? h5::File::create(tmp) : h5::File::open_for_append(tmp);
        if (turn == 0) write_meta(file, meta);
        for (size_t k = 0; k < state.size(); ++k)
          write_full(file, state[k].name, full[k]);
      }
      world.barrier();
    }
    if (world.rank() == 0) {
      {
        h5::File file = h5::File::open_for_append(tmp);
        link_aliases(file, aliases);
      }
      fs::rename(tmp, final_path);
    }
  } else {
    write_file(fmt::format("rank-{:05d}.h5", world.rank()), [&](h5::File& file) {
      file.make_group("/model");
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
        write_piece(file, t, replica.index);
      }
    });
  }
  world.barrier();
  if (world.rank() == 0) {
    write_text_atomically(folder / "COMMIT",
                          fmt::format("step {}\nformat {}\n", meta.step, meta.format));
    write_text_atomically(fs::path(dir) / "latest", step_folder(meta.step) + "\n");
    if (keep > 0) {
      std::vector<fs::path> committed;
      for (const auto& e : fs::directory_iterator(dir)) {
        if (e.is_directory() && e.path().filename().string().rfind("step-", 0) == 0 &&
            fs::exists(e.path() / "COMMIT")) {
          committed.push_back(e.path());
        }
      }
      std::sort(committed.begin(), committed.end());
      for (size_t i = 0; i + static_cast<size_t>(keep) < committed.size(); ++i)
        fs::remove_all(committed[i]);
    }
  }
  world.barrier();
  return folder.string();
}

CheckpointReader::CheckpointReader(const std::string& path_in) {
  const fs::path path = resolve_latest(path_in);
  path_ = path.string();
  for (const auto& f : checkpoint_files(path))
    files_.push_back(std::make_unique<h5::File>(h5::File::open(f.string())));
  meta_ = read_meta(*files_[0]);  // checks the format version
  check_rank_files(path, meta_);
  index_pieces();
  read_aliases();
}

void CheckpointReader::index_pieces() {
  for (size_t f = 0; f < files_.size(); ++f) {
    for (const std::string group : {"/model", "/optimizer"}) {
      for (const auto& rel : files_[f]->datasets(group)) {
        const std::string name = group.substr(1) + "/" + rel;
        const std::string dataset = group + "/" + rel;
        const auto shape = files_[f]->attr_ints(dataset, "global_shape");
        Piece piece{f, dataset, files_[f]->attr_ints(dataset, "global_offset"),
                    files_[f]->shape(dataset)};
        auto it = shapes_.find(name);
        VS_USER_CHECK(it == shapes_.end() || it->second == shape,
                      "[checkpoint] {}: tensor {} has two global shapes", path_, name);
        shapes_[name] = shape;
        placements_[name] = files_[f]->attr_string(dataset, "placements");
        pieces_[name].push_back(piece);
      }
    }
  }
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
    at::Tensor chunk = files_[p.file]->read_box(p.dataset, in_piece, count);
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

int64_t merge_checkpoint(const CheckpointReader& reader, const std::string& output,
                         bool model_only) {
  const std::string tmp = output + ".tmp";
  int64_t written = 0;
  {
    h5::File file = h5::File::create(tmp);
    CheckpointMeta meta = reader.meta();
    meta.format = "merged";
    write_meta(file, meta);
    for (const auto& name : reader.names()) {
      if (model_only && name.rfind("model/", 0) != 0) continue;
      write_full(file, name, reader.read_full(name));
      ++written;
    }
    link_aliases(file, reader.aliases());
  }
  fs::rename(tmp, output);
  return written;
}

}  // namespace vescale
