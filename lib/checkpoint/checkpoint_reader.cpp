#include "checkpoint/checkpoint_reader.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <numeric>
#include <set>
#include <sstream>

#include "checkpoint/checksums.h"
#include "checkpoint/step_folders.h"
#include "core/error.h"

namespace vescale {
namespace fs = std::filesystem;
using detail::check_piece;
using detail::check_same_checkpoint;
using detail::names_checksum;
using detail::read_meta;

namespace {

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

}  // namespace

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
  for (size_t f = 0; f < files_.size(); ++f)
    check_listing(f, index_file(f));
  check_pieces_cover_shapes();
}

int64_t CheckpointReader::index_file(size_t f) {
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
  return listed;
}

void CheckpointReader::check_listing(size_t f, int64_t listed) const {
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

void CheckpointReader::check_pieces_cover_shapes() const {
  // Pieces overlap only as replicas (the same box), so the distinct boxes of a tensor tile it: they
  // hold exactly its elements. More is a piece moved onto another (a damaged offset: the read
  // would mix two pieces' values); less, a missing rank file. Both are refused before a tensor
  // of that shape is allocated. (That the tiles leave no gap is checked as each box is read.)
  for (const auto& [name, pieces] : pieces_) {
    std::set<std::pair<std::vector<int64_t>, std::vector<int64_t>>> boxes;
    double held = 0;
    for (const auto& p : pieces) {
      if (boxes.insert({p.offsets, p.sizes}).second)
        held += std::accumulate(p.sizes.begin(), p.sizes.end(), 1.0, std::multiplies<double>());
    }
    const auto& shape = shapes_.at(name);
    const double whole =
        std::accumulate(shape.begin(), shape.end(), 1.0, std::multiplies<double>());
    VS_USER_CHECK(whole <= held,
                  "[checkpoint] {}: tensor {} has global shape [{}] ({} elements) but its pieces "
                  "in {} hold only {}: a damaged file or a missing rank file",
                  path_, name, fmt::join(shape, ", "), whole, fmt::join(files(), ", "), held);
    VS_USER_CHECK(whole == held,
                  "[checkpoint] {}: tensor {} of global shape [{}] ({} elements) has pieces in {} "
                  "that hold {}: two pieces overlap where only replicas may (a damaged offset)",
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

}  // namespace vescale
