#include "dtensor/placement.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cctype>

#include "core/error.h"

namespace vescale {

Placement Placement::normalized(int64_t ndim) const {
  if (!is_shard() || dim >= 0) return *this;
  VS_CHECK(dim + ndim >= 0, "[dtensor] {} does not fit a tensor of {} dims", str(), ndim);
  return shard(dim + ndim);
}

std::string Placement::str() const {
  switch (kind) {
    case PlacementKind::kShard:
      return fmt::format("S({})", dim);
    case PlacementKind::kReplicate:
      return "R";
    case PlacementKind::kPartial:
      return reduce == comm::ReduceOp::kSum ? "P"
                                            : fmt::format("P({})", comm::reduce_op_name(reduce));
  }
  return "?";
}

namespace {
constexpr int64_t kMaxDims = 64;
}  // namespace

Placement Placement::parse(const std::string& raw, const std::string& what) {
  std::string text;
  for (char c : raw) {
    if (!std::isspace(static_cast<unsigned char>(c))) text.push_back(c);
  }
  if (text == "R" || text == "Replicate()") return replicate();
  if (text == "P" || text == "Partial()") return partial();
  auto inner = [&](const std::string& prefix) -> std::optional<std::string> {
    if (text.size() > prefix.size() + 1 && text.rfind(prefix + "(", 0) == 0 && text.back() == ')') {
      return text.substr(prefix.size() + 1, text.size() - prefix.size() - 2);
    }
    return std::nullopt;
  };
  for (const char* prefix : {"S", "Shard"}) {
    if (auto arg = inner(prefix)) {
      const bool number = !arg->empty() &&
                          arg->find_first_not_of("-0123456789") == std::string::npos &&
                          arg->find('-', 1) == std::string::npos && *arg != "-";
      // A tensor has at most 64 dims (LibTorch's limit), so a longer number is no dim at all.
      if (number && arg->size() <= 4) {
        const int64_t dim = std::stoll(*arg);
        if (dim >= -kMaxDims && dim < kMaxDims) return shard(dim);
      }
    }
  }
  for (const char* prefix : {"P", "Partial"}) {
    if (auto arg = inner(prefix)) {
      if (*arg == "sum" || *arg == "avg" || *arg == "max")
        return partial(comm::parse_reduce_op(*arg));
    }
  }
  throw UserError(fmt::format(
      "{}: bad placement '{}': use R, S(d) (a dim from -64 to 63; negative counts from the end), "
      "P, P(sum), P(avg) or P(max)",
      what, raw));
}

bool Placement::operator==(const Placement& other) const {
  if (kind != other.kind) return false;
  if (kind == PlacementKind::kShard) return dim == other.dim;
  if (kind == PlacementKind::kPartial) return reduce == other.reduce;
  return true;
}

std::vector<bool> shard_flags(const Placements& placements) {
  std::vector<bool> flags;
  for (const Placement& p : placements)
    flags.push_back(p.is_shard());
  return flags;
}

std::string placements_str(const Placements& placements) {
  std::vector<std::string> parts;
  for (const auto& p : placements)
    parts.push_back(p.str());
  return fmt::format("[{}]", fmt::join(parts, ", "));
}

Placements parse_placements(const std::string& raw, const std::string& what) {
  std::string text = raw;
  if (!text.empty() && text.front() == '[' && text.back() == ']')
    text = text.substr(1, text.size() - 2);
  Placements out;
  int depth = 0;
  std::string current;
  for (char c : text) {
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(Placement::parse(current, what));
      current.clear();
    } else {
      current.push_back(c);
    }
  }
  out.push_back(Placement::parse(current, what));
  return out;
}

}  // namespace vescale
