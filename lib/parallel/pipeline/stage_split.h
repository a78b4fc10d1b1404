// Cutting a model's ordered layers into pipeline stages (docs/design.md §14): contiguous runs of
// layers, either balanced by estimated cost or starting at the layers the user names.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vescale::pipeline {

/// One layer in forward order, as the split sees it (train/ converts its Layer list to this).
struct StageLayer {
  std::string name;                  ///< what a split names it by: "transformer.h.2", "head"
  std::vector<std::string> modules;  ///< FQNs of the modules it runs
  double cost = 0;                   ///< estimated FLOPs per sample (forward + backward)
};

/// Layers [begin, end) of the list.
struct Stage {
  int begin = 0;
  int end = 0;
  std::vector<std::string> names;  ///< the layers' names, in order
  double cost = 0;                 ///< their summed cost
};

/// `n_stages` contiguous non-empty stages whose largest cost is as small as it can be; among
/// equally good splits, earlier stages get fewer layers (they hold activations longest).
/// Throws UserError when there are more stages than layers.
std::vector<Stage> split_balanced(const std::vector<StageLayer>& layers, int n_stages);

/// Stages that start at the first layer and at each of `starts` (n_stages − 1 layer names, in
/// order; a layer's first module FQN names it too). Throws UserError naming a wrong name (with
/// the nearest layer names), names out of order, or the wrong count.
std::vector<Stage> split_at(const std::vector<StageLayer>& layers, int n_stages,
                            const std::vector<std::string>& starts);

/// parallel.pp_split: {"balanced"} balances, anything else lists the stage starts.
std::vector<Stage> split_stages(const std::vector<StageLayer>& layers, int n_stages,
                                const std::vector<std::string>& pp_split);

}  // namespace vescale::pipeline
