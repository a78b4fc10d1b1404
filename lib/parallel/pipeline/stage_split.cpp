#include "parallel/pipeline/stage_split.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/suggest.h"

namespace vescale::pipeline {
namespace {

std::vector<std::string> names_of(const std::vector<StageLayer>& layers) {
  std::vector<std::string> names;
  for (const auto& l : layers)
    names.push_back(l.name);
  return names;
}

void check_count(const std::vector<StageLayer>& layers, int n_stages) {
  VS_USER_CHECK(n_stages >= 1, "[pipeline] {} stages: need at least 1", n_stages);
  VS_USER_CHECK(static_cast<int>(layers.size()) >= n_stages,
                "[pipeline] {} stages (parallel.pp x parallel.pp_virtual) but the model has only "
                "{} layers ({}); every stage needs one",
                n_stages, layers.size(), fmt::join(names_of(layers), ", "));
}

/// The stages that begin at `begins` (ascending, the first 0).
std::vector<Stage> stages_from(const std::vector<StageLayer>& layers,
                               const std::vector<int>& begins) {
  std::vector<Stage> stages;
  for (size_t k = 0; k < begins.size(); ++k) {
    Stage st;
    st.begin = begins[k];
    st.end = k + 1 < begins.size() ? begins[k + 1] : static_cast<int>(layers.size());
    for (int i = st.begin; i < st.end; ++i) {
      st.names.push_back(layers[i].name);
      st.cost += layers[i].cost;
    }
    stages.push_back(std::move(st));
  }
  return stages;
}

}  // namespace

std::vector<Stage> split_balanced(const std::vector<StageLayer>& layers, int n_stages) {
  check_count(layers, n_stages);
  const int n = static_cast<int>(layers.size());
  std::vector<double> prefix(n + 1, 0.0);
  for (int i = 0; i < n; ++i)
    prefix[i + 1] = prefix[i] + layers[i].cost;
  auto cost = [&](int begin, int end) { return prefix[end] - prefix[begin]; };
  // best[k][i]: the smallest largest-stage cost of layers [i, n) in k stages.
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(n_stages + 1, std::vector<double>(n + 1, inf));
  for (int i = 0; i < n; ++i)
    best[1][i] = cost(i, n);
  for (int k = 2; k <= n_stages; ++k)
    for (int i = 0; i + k <= n; ++i)
      for (int t = i + 1; t + k - 1 <= n; ++t)
        best[k][i] = std::min(best[k][i], std::max(cost(i, t), best[k - 1][t]));
  // Walk forward taking the earliest cut that stays optimal (sums differ in the last bits).
  std::vector<int> begins{0};
  for (int k = n_stages, i = 0; k > 1; --k) {
    const double target = best[k][i] + 1e-12 * std::max(1.0, std::abs(best[k][i]));
    int t = i + 1;
    while (std::max(cost(i, t), best[k - 1][t]) > target)
      ++t;
    begins.push_back(t);
    i = t;
  }
  return stages_from(layers, begins);
}

std::vector<Stage> split_at(const std::vector<StageLayer>& layers, int n_stages,
                            const std::vector<std::string>& starts) {
  check_count(layers, n_stages);
  VS_USER_CHECK(static_cast<int>(starts.size()) == n_stages - 1,
                "[pipeline] parallel.pp_split names {} stage starts ({}), but {} stages need {}: "
                "where each stage after the first begins",
                starts.size(), fmt::join(starts, ", "), n_stages, n_stages - 1);
  std::vector<int> begins{0};
  for (const auto& name : starts) {
    int index = -1;
    for (int i = 0; i < static_cast<int>(layers.size()) && index < 0; ++i)
      if (layers[i].name == name || (!layers[i].modules.empty() && layers[i].modules[0] == name))
        index = i;
    if (index < 0) {
      throw UserError(fmt::format(
          "[pipeline] parallel.pp_split: '{}' does not start a layer{}; the layers are {}", name,
          did_you_mean(name, names_of(layers)), fmt::join(names_of(layers), ", ")));
    }
    VS_USER_CHECK(index > 0,
                  "[pipeline] parallel.pp_split: '{}' starts the first stage already; name where "
                  "the stages after it begin",
                  name);
    VS_USER_CHECK(index > begins.back(),
                  "[pipeline] parallel.pp_split: '{}' comes after '{}' but is not later in the "
                  "model: stage starts go in forward order, each once",
                  name, layers[begins.back()].name);
    begins.push_back(index);
  }
  return stages_from(layers, begins);
}

std::vector<Stage> split_stages(const std::vector<StageLayer>& layers, int n_stages,
                                const std::vector<std::string>& pp_split) {
  if (pp_split == std::vector<std::string>{"balanced"}) return split_balanced(layers, n_stages);
  return split_at(layers, n_stages, pp_split);
}

}  // namespace vescale::pipeline
