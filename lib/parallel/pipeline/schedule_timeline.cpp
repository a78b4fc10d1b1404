#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "parallel/pipeline/schedule.h"

namespace vescale::pipeline {
namespace {

/// The stages on `rank`, as "0, 4".
std::string stage_list(const std::vector<int>& stage_rank, int rank) {
  std::vector<std::string> stages;
  for (size_t s = 0; s < stage_rank.size(); ++s)
    if (stage_rank[s] == rank) stages.push_back(std::to_string(s));
  return fmt::format("{}", fmt::join(stages, ", "));
}

}  // namespace

std::string timeline(const PipelineSchedule& s, const Simulation& sim) {
  size_t width = 2;
  for (const auto& runs : sim.runs)
    for (const auto& t : runs)
      width = std::max(width, to_string(t.action).size() + 1);
  const int rank_width = static_cast<int>(std::to_string(s.pp - 1).size());
  std::string out;
  for (int r = 0; r < s.pp; ++r) {
    std::vector<std::string> cells(static_cast<size_t>(sim.makespan), ".");
    for (const auto& t : sim.runs[r])
      for (int64_t c = t.start; c < t.end; ++c)
        cells[c] = c == t.start ? to_string(t.action) : "~";
    out += fmt::format("rank {:<{}} |", r, rank_width);
    for (const auto& c : cells)
      out += fmt::format(" {:<{}}", c, width - 1);
    out += fmt::format("  (stages {})\n", stage_list(s.stage_rank, r));
  }
  if (!sim.deadlock_free) {
    out += "deadlock:\n";
    for (const auto& line : sim.stuck)
      out += "  " + line + "\n";
  }
  return out;
}

std::string format_actions(const PipelineSchedule& s) {
  std::string out;
  for (int r = 0; r < s.pp; ++r) {
    std::vector<std::string> items;
    for (const auto& a : s.ranks[r])
      items.push_back(to_string(a));
    out += fmt::format("rank {}: {}\n", r, fmt::join(items, " "));
  }
  return out;
}

}  // namespace vescale::pipeline
