// The job config: a TOML file with torchtitan-like sections, overridable on the command line as
// --section.key=value. Every key is declared once in a schema (name, default, help and the
// JobConfig field it fills) that drives parsing, type checks, overrides, "did you mean"
// suggestions, the effective config text and so the README table.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace vescale {

/// A key's value. A list of strings is written as a TOML array (`["a", "b"]`, also on the
/// command line); a plain string is accepted as a list of one and a list of one prints as a string.
using ConfigValue = std::variant<int64_t, double, bool, std::string, std::vector<std::string>,
                                 std::vector<int64_t>>;

struct JobConfig {
  // [job]
  std::string name;
  std::string dump_folder;
  // [model]
  std::string model;  ///< "gpt" or "mlp"
  int64_t vocab_size, block_size, n_layer, n_head, n_embd, vocab_multiple;
  double dropout;
  int64_t d_in, d_hidden, d_out, n_layers;
  // [parallel]
  int64_t pp, dp, tp, microbatches, pp_virtual;
  std::vector<int64_t> tp_shape;  ///< {} (a 1-D tp mesh) or {tp_a, tp_b}, tp_a x tp_b = tp
  int64_t zero;                   ///< ZeRO stage over dp: 0 (none) to 3 (parameters too)
  std::string plan, pp_schedule;
  std::vector<std::string> pp_split;  ///< {"balanced"} or the FQNs that start stages 2, 3, ...
  // [data]
  std::string data_source, data_path;
  double val_fraction;
  // [training]
  int64_t steps, global_batch_size, seq_len, seed;
  std::string device;  ///< "auto", "cpu" or "cuda" (rank r: cuda:LOCAL_RANK)
  std::string dtype;
  double grad_clip;
  std::string on_nonfinite;  ///< "stop" or "skip" (NOTE [Non-finite steps])
  int64_t max_skipped;       ///< skipped steps in a row before stopping
  // [optimizer]
  std::string optimizer;
  double lr, beta1, beta2, eps, weight_decay, momentum;
  // [lr_scheduler]
  int64_t warmup_steps;
  std::string decay;
  double min_lr_ratio;
  // [eval]
  int64_t eval_interval, eval_windows;
  // [checkpoint]
  std::string checkpoint_format, checkpoint_load;
  int64_t checkpoint_interval, checkpoint_keep;
  bool checkpoint_async;      ///< write in a background thread (NOTE [Async checkpoints])
  bool checkpoint_overwrite;  ///< a new run may replace another run's steps (NOTE [Checkpoint
                              ///< integrity])
  // [metrics]
  int64_t log_interval;
  double peak_flops;
  // [comm]
  double timeout_s;
  std::string backend;
  double bucket_mb;

  std::string source;  ///< the file it came from
  std::string text;  ///< the effective config as TOML (file + overrides), for checkpoints and logs
  std::string annotated_text;  ///< the same with each key's help as a comment

  /// Loads `path` and applies overrides ("--training.steps=20", or "--training.steps", "20"
  /// pairs already joined). Throws UserError naming file:line and key, or the override.
  static JobConfig load(const std::string& path, const std::vector<std::string>& overrides = {});
  /// The same from TOML text (for tests).
  static JobConfig parse(const std::string& toml_text, const std::string& source,
                         const std::vector<std::string>& overrides = {});

  int64_t world_size() const { return pp * dp * tp; }
  /// The tp mesh's sizes: tp_shape, or {tp} for a 1-D tp mesh.
  std::vector<int64_t> tp_dims() const {
    return tp_shape.empty() ? std::vector<int64_t>{tp} : tp_shape;
  }
  /// Sequences per micro-batch on one dp rank.
  int64_t micro_batch_size() const { return global_batch_size / dp / microbatches; }
};

/// The JobConfig field a key is stored in, of the type of its value.
using ConfigField = std::variant<int64_t JobConfig::*, double JobConfig::*, bool JobConfig::*,
                                 std::string JobConfig::*, std::vector<std::string> JobConfig::*,
                                 std::vector<int64_t> JobConfig::*>;

/// The numbers a numeric key accepts: from lo to hi, either end open or unbounded.
struct ConfigRange {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool lo_open = false, hi_open = false;

  bool contains(double v) const;
  /// ">= 1", "> 0", "in [0, 1)".
  std::string str() const;
};

/// One config key, declared once: everything else (parsing, overrides, the effective text and
/// the README table) iterates config_schema().
struct ConfigKey {
  std::string name;  ///< "training.steps"
  ConfigValue default_value;
  std::string help;
  ConfigField field;                                ///< &JobConfig::steps
  std::optional<ConfigRange> range = std::nullopt;  ///< numeric keys: the values that make sense
};

/// Every key a job config may have, in README order.
const std::vector<ConfigKey>& config_schema();

/// Key `k`'s value in `c` as TOML: `4`, `"adamw"`, `0.1` (numbers in their shortest exact form).
std::string value_text(const JobConfig& c, const ConfigKey& k);

/// Every schema key's value in `toml_text` (a config as a checkpoint recorded it), as value_text,
/// keyed by name: the default where the text lacks the key (a version before it), nothing for keys
/// the schema no longer knows; empty when the text is not TOML. No checks across keys.
std::map<std::string, std::string> recorded_values(const std::string& toml_text);

/// "--a.b=c" and "--a.b c" forms from argv-like leftovers into "a.b=c" items; throws on others.
std::vector<std::string> collect_overrides(const std::vector<std::string>& args);

}  // namespace vescale
