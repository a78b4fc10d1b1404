#include "checkpoint/checkpoint_format.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <sstream>

#include "checkpoint/checksums.h"
#include "checkpoint/crc32c.h"
#include "core/error.h"

namespace vescale {
namespace {

/// Bounds of what a checkpoint's metadata may say, checked before anything is allocated from it.
constexpr int64_t kMaxWorldSize = int64_t{1} << 20;
constexpr int64_t kMaxTensorElements = int64_t{1} << 40;

/// Tensors under /model and /optimizer: what the file holds (a hard link counts once).
int64_t count_datasets(const h5::File& file) {
  return static_cast<int64_t>(file.datasets("/model").size() + file.datasets("/optimizer").size());
}

}  // namespace

const EnumNames<CheckpointFormat>& checkpoint_format_names() {
  static const EnumNames<CheckpointFormat> names("checkpoint.format",
                                                 {{CheckpointFormat::kSharded, "sharded"},
                                                  {CheckpointFormat::kDeduped, "deduped"},
                                                  {CheckpointFormat::kMerged, "merged"}});
  return names;
}

CheckpointFormat parse_checkpoint_format(const std::string& text) {
  return checkpoint_format_names().parse(text);
}

const char* checkpoint_format_name(CheckpointFormat format) {
  return checkpoint_format_names().name(format);
}

namespace detail {

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
  if (!m.lora_base.empty()) {
    file.set_attr("/meta", "lora_base", m.lora_base);
    file.set_attr("/meta", "lora_base_checksum", m.lora_base_checksum);
  }
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
  if (file.has_attr("/meta", "lora_base")) {
    m.lora_base = file.attr_string("/meta", "lora_base");
    m.lora_base_checksum = file.attr_string("/meta", "lora_base_checksum");
  }
  std::stringstream dims(file.attr_string("/meta", "mesh_dims"));
  for (std::string d; std::getline(dims, d, ',');)
    m.mesh_dims.push_back(d);
  VS_USER_CHECK(m.step >= 0, "[checkpoint] {}: /meta step is {}; a step is never negative",
                file.path(), m.step);
  VS_USER_CHECK(m.world_size >= 1 && m.world_size <= kMaxWorldSize,
                "[checkpoint] {}: /meta world_size is {}, outside [1, {}]", file.path(),
                m.world_size, kMaxWorldSize);
  VS_USER_CHECK(checkpoint_format_names().find(m.format).has_value(),
                "[checkpoint] {}: /meta format is '{}', not {}", file.path(), m.format,
                checkpoint_format_names().choices());
  return m;
}

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

SavedPiece full_piece(const std::string& name, at::Tensor full) {
  std::vector<int64_t> shape = full.sizes().vec();
  std::vector<int64_t> offset(shape.size(), 0);
  return {name, std::move(full), std::move(shape), std::move(offset), "merged", {1}, "merged", 0};
}

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

void stamp_dataset_count(h5::File& file) {
  file.set_attr("/meta", "datasets", count_datasets(file));
  file.set_attr("/meta", "names_crc32c", names_checksum(file));
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

}  // namespace detail
}  // namespace vescale
