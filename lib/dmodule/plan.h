// Sharding plans (docs/design.md §7): which placements each parameter gets and where the forward
// reshards, keyed by FQN globs. Loaded from JSON or TOML of the same structure.
#pragma once

#include <string>
#include <vector>

#include "dtensor/placement.h"

namespace vescale {

struct PlanParameterRule {
  std::string key;  ///< FQN glob of parameters
  Placements placements;
  int line = 0;  ///< in the plan file, when known (TOML)
};

struct PlanForwardRule {
  std::string key;                     ///< as written: "transformer.h.*.attn.input"
  std::string module;                  ///< FQN glob of modules ("" for the root)
  bool input = true;                   ///< .input or .output
  std::vector<Placements> placements;  ///< one list per positional tensor
  int line = 0;
};

struct Plan {
  std::string source;  ///< file it came from
  std::string model;
  std::string description;
  std::vector<PlanParameterRule> parameter;
  std::vector<PlanForwardRule> forward;

  /// Loads a zoo name ("gpt/megatron-sp") or a path to a .json or .toml file. Throws UserError
  /// naming the file and key on any mistake (unknown keys come with "did you mean").
  static Plan load(const std::string& name_or_path);
  static Plan parse_json(const std::string& text, const std::string& source);
  static Plan parse_toml(const std::string& text, const std::string& source);
};

/// Where a plan rule stands for messages: "plan.toml:12", or the source alone when its line is
/// unknown (0: JSON).
std::string plan_location(const std::string& source, int line);

/// The folder of the plan zoo: $VESCALE_PLANS_DIR, else the plans/ folder of this build.
std::string plan_zoo_dir();
/// Zoo plan names ("gpt/megatron-sp", ...), sorted.
std::vector<std::string> plan_zoo_names();

}  // namespace vescale
