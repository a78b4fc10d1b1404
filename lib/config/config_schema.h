// The config schema: every key a job config may have, declared once (name, default, help, range
// and where its value is stored). The families' [model] keys come from the families
// (family/model_family.h); everything else iterates config_schema().
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "config/job_config.h"

namespace vescale {

/// The largest parallel degree of one mesh dim, and of the whole mesh.
constexpr double kMaxMeshDim = 1 << 16;
constexpr int64_t kMaxWorld = int64_t{1} << 20;

/// A family's [model] key, stored in JobConfig::model_keys under `name`.
struct ModelKeyField {
  std::string name;  ///< without "model."
  bool operator==(const ModelKeyField& other) const { return name == other.name; }
};

/// Where a key's value is stored: a JobConfig field of the type of its value, a model key, or
/// for an enumerated key (its value a name) a field of its enum (config/config_enums.h).
using ConfigField =
    std::variant<int64_t JobConfig::*, double JobConfig::*, bool JobConfig::*,
                 std::string JobConfig::*, std::vector<std::string> JobConfig::*,
                 std::vector<int64_t> JobConfig::*, ModelKeyField, Recompute JobConfig::*,
                 LrDecay JobConfig::*, OptimizerKind JobConfig::*, MuonScale JobConfig::*,
                 DataSource JobConfig::*, PpSchedule JobConfig::*, OnNonfinite JobConfig::*,
                 DeviceSetting JobConfig::*, c10::ScalarType JobConfig::*,
                 comm::Backend JobConfig::*, CheckpointFormat JobConfig::*>;

/// One config key, declared once: everything else (parsing, overrides, the effective text and
/// the config reference) iterates config_schema().
struct ConfigKey {
  std::string name;  ///< "training.steps"
  ConfigValue default_value;
  std::string help;
  ConfigField field;                                ///< &JobConfig::steps
  std::optional<ConfigRange> range = std::nullopt;  ///< numeric keys: the values that make sense
  /// A [model] key: the families that read it (empty: a key of every job) and its role.
  std::vector<std::string> families = {};
  KeyRole role = KeyRole::kArchitecture;

  /// Whether a job of the family `model` reads this key.
  bool applies_to(const std::string& model) const;
  /// An enumerated key's names, in its table's order; empty for other keys.
  std::vector<std::string> choices() const;
};

/// Every key a job config may have, in the config reference's order (the families' [model] keys
/// after model.name, family by family).
const std::vector<ConfigKey>& config_schema();

/// Key `k`'s value in `c`.
ConfigValue config_value(const JobConfig& c, const ConfigKey& k);

/// Key `k`'s value in `c` as TOML: `4`, `"adamw"`, `0.1` (numbers in their shortest exact form).
std::string value_text(const JobConfig& c, const ConfigKey& k);

}  // namespace vescale
