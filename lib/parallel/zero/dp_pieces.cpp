#include "parallel/zero/dp_pieces.h"

#include <ATen/ATen.h>
#include <c10/util/accumulate.h>

#include <algorithm>

#include "core/chunking.h"
#include "core/error.h"

namespace vescale {

std::vector<FlatRange> dp_pieces(const std::vector<int64_t>& local_shape,
                                 const std::vector<int64_t>& nesting) {
  VS_CHECK(!local_shape.empty(), "[zero] a 0-dim tensor has no rows to split over dp");
  const int64_t row = c10::multiply_integers(local_shape.begin() + 1, local_shape.end());
  // Rows [offset, offset + count) per replica, refined one dim at a time.
  std::vector<std::pair<int64_t, int64_t>> rows{{0, local_shape[0]}};
  for (int64_t parts : nesting) {
    std::vector<std::pair<int64_t, int64_t>> finer;
    for (const auto& [offset, count] : rows) {
      const auto sizes = chunk_sizes(count, parts);
      const auto offsets = chunk_offsets(count, parts);
      for (int64_t r = 0; r < parts; ++r)
        finer.emplace_back(offset + offsets[r], sizes[r]);
    }
    rows = std::move(finer);
  }
  std::vector<FlatRange> out;
  for (const auto& [offset, count] : rows)
    out.push_back({offset * row, count * row});
  return out;
}

DTensorSpec dp_piece_spec(const DTensorSpec& spec, const std::vector<std::string>& replica_dims) {
  VS_CHECK(spec.ndim() > 0, "[zero] a 0-dim tensor has no rows to split over dp");
  std::vector<int> replica;
  for (const auto& name : replica_dims) {
    replica.push_back(spec.mesh.dim_index(name));
    VS_CHECK(spec.placements[replica.back()].is_replicate(), "[zero] {} is not replicated over {}",
             spec.str(), name);
  }
  std::vector<std::string> order;
  Placements placements;
  const auto names = spec.mesh.dim_names();
  for (int i = 0; i < spec.mesh.ndim(); ++i) {
    if (std::find(replica.begin(), replica.end(), i) != replica.end()) continue;
    order.push_back(names[i]);
    placements.push_back(spec.placements[i]);
  }
  for (const auto& name : replica_dims) {
    order.push_back(name);
    placements.push_back(Placement::shard(0));
  }
  return DTensorSpec(spec.mesh.sub(order), placements, spec.shape);
}

DpPacking::DpPacking(std::vector<std::vector<FlatRange>> pieces, int64_t dp)
    : pieces_(std::move(pieces)), at_(pieces_.size(), std::vector<int64_t>(dp)), dp_(dp) {
  for (int64_t r = 0; r < dp; ++r) {
    int64_t filled = 0;
    for (size_t k = 0; k < pieces_.size(); ++k) {
      VS_CHECK(static_cast<int64_t>(pieces_[k].size()) == dp,
               "[zero] tensor {} has {} pieces for {} dp ranks", k, pieces_[k].size(), dp);
      at_[k][r] = filled;
      filled += pieces_[k][r].numel;
    }
    segment_ = std::max(segment_, filled);
  }
}

void DpPacking::pack(at::Tensor& packed, size_t k, const at::Tensor& flat) const {
  for (int64_t r = 0; r < dp_; ++r) {
    const FlatRange& p = pieces_[k][r];
    packed.narrow(0, r * segment_ + at_[k][r], p.numel).copy_(flat.narrow(0, p.offset, p.numel));
  }
}

at::Tensor DpPacking::in_segment(const at::Tensor& segment, size_t k, int64_t rank) const {
  return segment.narrow(0, at_[k][rank], pieces_[k][rank].numel);
}

void DpPacking::unpack(const at::Tensor& packed, size_t k, at::Tensor& flat) const {
  for (int64_t r = 0; r < dp_; ++r) {
    const FlatRange& p = pieces_[k][r];
    flat.narrow(0, p.offset, p.numel).copy_(packed.narrow(0, r * segment_ + at_[k][r], p.numel));
  }
}

}  // namespace vescale
