#include "config/job_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <toml++/toml.h>
#include <algorithm>
#include <cmath>
#include <optional>
#include <sstream>
#include <type_traits>

#include "config/memory_estimate.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/suggest.h"

namespace vescale {
namespace {

using Values = std::map<std::string, ConfigValue>;

/// The largest parallel degree of one mesh dim, and of the whole mesh.
constexpr double kMaxMeshDim = 1 << 16;
constexpr int64_t kMaxWorld = int64_t{1} << 20;

const char* type_name(const ConfigValue& v) {
  switch (v.index()) {
    case 0:
      return "an integer";
    case 1:
      return "a number";
    case 2:
      return "true or false";
    case 3:
      return "a string";
    case 4:
      return "a string or a list of strings";
    default:
      return "a list of integers ([2, 2])";
  }
}

const ConfigKey* find_key(const std::string& name) {
  for (const auto& k : config_schema()) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

std::string unknown_key_message(const std::string& name) {
  std::vector<std::string> names;
  for (const auto& k : config_schema())
    names.push_back(k.name);
  return fmt::format("unknown key '{}'{}", name, did_you_mean(name, names));
}

/// A TOML node as the schema's type, or nullopt.
std::optional<ConfigValue> from_node(const toml::node& node, const ConfigValue& like) {
  switch (like.index()) {
    case 0:
      if (auto v = node.value_exact<int64_t>()) return ConfigValue(*v);
      return std::nullopt;
    case 1:
      if (auto v = node.value_exact<double>()) return ConfigValue(*v);
      if (auto v = node.value_exact<int64_t>()) return ConfigValue(static_cast<double>(*v));
      return std::nullopt;
    case 2:
      if (auto v = node.value_exact<bool>()) return ConfigValue(*v);
      return std::nullopt;
    case 3:
      if (auto v = node.value_exact<std::string>()) return ConfigValue(*v);
      return std::nullopt;
    case 5: {
      const toml::array* array = node.as_array();
      if (array == nullptr) return std::nullopt;
      std::vector<int64_t> items;
      for (const toml::node& item : *array) {
        auto v = item.value_exact<int64_t>();
        if (!v) return std::nullopt;
        items.push_back(*v);
      }
      return ConfigValue(items);
    }
    default: {
      if (auto v = node.value_exact<std::string>())
        return ConfigValue(std::vector<std::string>{*v});
      const toml::array* array = node.as_array();
      if (array == nullptr) return std::nullopt;
      std::vector<std::string> items;
      for (const toml::node& item : *array) {
        auto v = item.value_exact<std::string>();
        if (!v) return std::nullopt;
        items.push_back(*v);
      }
      return ConfigValue(items);
    }
  }
}

/// A command-line value as the schema's type, or nullopt.
std::optional<ConfigValue> from_text(const std::string& text, const ConfigValue& like) {
  const bool list = like.index() == 4;
  if (like.index() == 3 || (list && text.rfind('[', 0) != 0)) {
    const bool quoted = text.size() >= 2 && (text.front() == '"' || text.front() == '\'') &&
                        text.back() == text.front();
    std::string value = quoted ? text.substr(1, text.size() - 2) : text;
    if (list) return ConfigValue(std::vector<std::string>{std::move(value)});
    return ConfigValue(std::move(value));
  }
  try {
    auto table = toml::parse("v = " + text);
    if (auto node = table.get("v")) return from_node(*node, like);
  } catch (const toml::parse_error&) {
  }
  return std::nullopt;
}

std::string toml_string(const std::string& text) {
  std::ostringstream out;
  out << toml::value<std::string>(text);
  return out.str();
}

std::string toml_literal(const ConfigValue& v) {
  switch (v.index()) {
    case 0:
      return std::to_string(std::get<int64_t>(v));
    case 1: {
      std::ostringstream out;
      out << toml::value<double>(std::get<double>(v));
      return out.str();
    }
    case 2:
      return std::get<bool>(v) ? "true" : "false";
    case 3:
      return toml_string(std::get<std::string>(v));
    case 5:
      return fmt::format("[{}]", fmt::join(std::get<std::vector<int64_t>>(v), ", "));
    default: {
      const auto& items = std::get<std::vector<std::string>>(v);
      if (items.size() == 1) return toml_string(items[0]);
      std::vector<std::string> literals;
      for (const auto& item : items)
        literals.push_back(toml_string(item));
      return fmt::format("[{}]", fmt::join(literals, ", "));
    }
  }
}

std::string effective_text(const Values& values, bool with_help) {
  std::string out, section;
  for (const auto& k : config_schema()) {
    const std::string s = k.name.substr(0, k.name.find('.'));
    if (s != section) {
      out += fmt::format("{}[{}]\n", out.empty() ? "" : "\n", s);
      section = s;
    }
    const std::string line = fmt::format("{} = {}", k.name.substr(k.name.find('.') + 1),
                                         toml_literal(values.at(k.name)));
    const std::string help = k.range ? fmt::format("{} ({})", k.help, k.range->str()) : k.help;
    out += with_help ? fmt::format("{:<36} # {}\n", line, help) : line + "\n";
  }
  return out;
}

/// A numeric value outside its key's range is an error naming the key, the value and the range.
void check_range(const ConfigKey& k, const ConfigValue& value, const std::string& at) {
  if (!k.range) return;
  double number = 0;
  std::string text;
  if (const auto* i = std::get_if<int64_t>(&value)) {
    number = static_cast<double>(*i);
    text = std::to_string(*i);
  } else if (const auto* d = std::get_if<double>(&value)) {
    number = *d;
    text = fmt::format("{}", *d);
  } else {
    return;
  }
  VS_USER_CHECK(k.range->contains(number), "{}: {} = {} must be {} ({})", at, k.name, text,
                k.range->str(), k.help);
}

/// Sets key `name` to `parse(its default)`; errors start with `at` ("config f.toml:3").
template <typename Parse>
void set_value(Values& values, const std::string& name, const std::string& at, Parse parse) {
  const ConfigKey* k = find_key(name);
  VS_USER_CHECK(k != nullptr, "{}: {}", at, unknown_key_message(name));
  auto parsed = parse(k->default_value);
  VS_USER_CHECK(parsed.has_value(), "{}: key '{}' must be {}", at, name,
                type_name(k->default_value));
  const double* number = std::get_if<double>(&*parsed);
  VS_USER_CHECK(number == nullptr || std::isfinite(*number),
                "{}: key '{}' must be a finite number, got {}", at, name,
                number == nullptr ? 0.0 : *number);
  // Numbers reach float32 tensors (a learning rate of 1e39 would overflow after start-up).
  VS_USER_CHECK(number == nullptr || std::abs(*number) <= std::numeric_limits<float>::max(),
                "{}: key '{}' = {} is beyond float32's range (at most {:.2g})", at, name,
                number == nullptr ? 0.0 : *number, std::numeric_limits<float>::max());
  check_range(*k, *parsed, at);
  values[name] = *parsed;
}

Values default_values() {
  Values values;
  for (const auto& k : config_schema())
    values[k.name] = k.default_value;
  return values;
}

toml::table parse_document(const std::string& toml_text, const std::string& source) {
  try {
    return toml::parse(toml_text, source);
  } catch (const toml::parse_error& e) {
    throw UserError(fmt::format("config {}:{}: not valid TOML: {}", source, e.source().begin.line,
                                e.description()));
  }
}

/// The file's [section] key = value lines into `values`; errors name file:line.
void read_document(const toml::table& doc, const std::string& source, Values& values) {
  for (const auto& [section, node] : doc) {
    const int line = static_cast<int>(node.source().begin.line);
    const toml::table* table = node.as_table();
    VS_USER_CHECK(table != nullptr, "config {}:{}: '{}' must be a [section]", source, line,
                  section.str());
    for (const auto& [key, value] : *table) {
      const toml::node& entry = value;  // (a lambda cannot capture a structured binding)
      set_value(values, fmt::format("{}.{}", section.str(), key.str()),
                fmt::format("config {}:{}", source, entry.source().begin.line),
                [&entry](const ConfigValue& like) { return from_node(entry, like); });
    }
  }
}

/// "section.key=value" items into `values`.
void apply_overrides(const std::vector<std::string>& overrides, Values& values) {
  for (const auto& item : overrides) {
    const size_t eq = item.find('=');
    VS_USER_CHECK(eq != std::string::npos, "override --{}: expected --section.key=value", item);
    set_value(values, item.substr(0, eq), fmt::format("override --{}", item),
              [&](const ConfigValue& like) { return from_text(item.substr(eq + 1), like); });
  }
}

/// Every key's value stored in its JobConfig field.
JobConfig bind_fields(const Values& values) {
  JobConfig c;
  for (const auto& k : config_schema()) {
    std::visit(
        [&](auto field) {
          using T = std::decay_t<decltype(c.*field)>;
          c.*field = std::get<T>(values.at(k.name));
        },
        k.field);
  }
  return c;
}

/// Rules of one string key: its allowed words (numbers are range-checked as they are read).
void check_values(const JobConfig& c) {
  auto one_of = [&](const std::string& key, const std::string& value,
                    std::vector<std::string> allowed) {
    VS_USER_CHECK(std::find(allowed.begin(), allowed.end(), value) != allowed.end(),
                  "config {}: {} = \"{}\" is not one of {}", c.source, key, value,
                  fmt::join(allowed, ", "));
  };
  VS_USER_CHECK(!c.dump_folder.empty(),
                "config {}: job.dump_folder is empty; name the folder for metrics.jsonl and "
                "checkpoints/ (\".\" for the working folder)",
                c.source);
  one_of("model.name", c.model, {"gpt", "mlp"});
  one_of("data.source", c.data_source, {"synthetic", "text", "tokens"});
  one_of("training.device", c.device, {"auto", "cpu", "cuda"});
  one_of("training.dtype", c.dtype, {"float32", "float64", "bfloat16"});
  one_of("optimizer.name", c.optimizer, {"adamw", "sgd"});
  one_of("lr_scheduler.decay", c.decay, {"cosine", "constant"});
  one_of("training.on_nonfinite", c.on_nonfinite, {"stop", "skip"});
  one_of("comm.backend", c.backend, {"auto", "gloo", "nccl"});
  one_of("checkpoint.format", c.checkpoint_format, {"sharded", "deduped", "merged"});
  one_of("parallel.pp_schedule", c.pp_schedule,
         {"gpipe", "1f1b", "interleaved-1f1b", "zbv", "zb-h1"});
}

/// Rules across keys.
void check_combinations(const JobConfig& c) {
  VS_USER_CHECK(c.world_size() <= kMaxWorld,
                "config {}: parallel.pp x dp x tp = {} x {} x {} = {} ranks, more than {}",
                c.source, c.pp, c.dp, c.tp, c.world_size(), kMaxWorld);
  if (!c.tp_shape.empty()) {
    VS_USER_CHECK(c.tp_shape.size() == 2 && c.tp_shape[0] >= 1 && c.tp_shape[1] >= 1 &&
                      c.tp_shape[0] <= kMaxMeshDim && c.tp_shape[1] <= kMaxMeshDim,
                  "config {}: parallel.tp_shape = [{}] must be two positive sizes, tp_a x tp_b "
                  "(or empty for a 1-D tp mesh)",
                  c.source, fmt::join(c.tp_shape, ", "));
    VS_USER_CHECK(c.tp_shape[0] * c.tp_shape[1] == c.tp,
                  "config {}: parallel.tp_shape = [{}] multiplies to {}, but parallel.tp = {}; "
                  "set parallel.tp = {}",
                  c.source, fmt::join(c.tp_shape, ", "), c.tp_shape[0] * c.tp_shape[1], c.tp,
                  c.tp_shape[0] * c.tp_shape[1]);
  }
  VS_USER_CHECK(c.global_batch_size % (c.dp * c.microbatches) == 0,
                "config {}: training.global_batch_size = {} is not divisible by parallel.dp x "
                "parallel.microbatches "
                "= {} x {}",
                c.source, c.global_batch_size, c.dp, c.microbatches);
  VS_USER_CHECK(c.model != "gpt" || c.seq_len <= c.block_size,
                "config {}: training.seq_len = {} is longer than model.block_size = {}", c.source,
                c.seq_len, c.block_size);
  VS_USER_CHECK(c.data_source == "synthetic" || !c.data_path.empty(),
                "config {}: data.source = \"{}\" needs data.path", c.source, c.data_source);
  VS_USER_CHECK(c.model == "gpt" || c.data_source == "synthetic",
                "config {}: model.name = \"mlp\" trains on data.source = \"synthetic\" only",
                c.source);
  VS_USER_CHECK(c.backend != "nccl" || c.device != "cpu",
                "config {}: comm.backend = \"nccl\" moves CUDA tensors, but training.device = "
                "\"cpu\": use comm.backend = \"auto\" or \"gloo\", or training.device = \"cuda\"",
                c.source);
  VS_USER_CHECK(c.backend != "gloo" || c.device != "cuda",
                "config {}: comm.backend = \"gloo\" moves CPU tensors only, but training.device = "
                "\"cuda\": use comm.backend = \"auto\" or \"nccl\"",
                c.source);
}

/// Not deduced from the default, so `int64_t` fields take `64` and string fields `"gpt"`.
template <typename T>
struct Exactly {
  using type = T;
};

/// A schema entry whose default has its field's type.
template <typename T>
ConfigKey key(const char* name, T JobConfig::*field, typename Exactly<T>::type default_value,
              const char* help, std::optional<ConfigRange> range = std::nullopt) {
  return {name, ConfigValue(std::move(default_value)), help, field, range};
}

// The ranges of numeric keys: what makes sense, so that a typo (beta2 = 2, eps = 0, n_embd = 0,
// a negative interval) is a config error at its line rather than a NaN or a hang later.
ConfigRange at_least(double lo) {
  return {lo};
}
ConfigRange above(double lo) {
  return {lo, ConfigRange{}.hi, true};
}
ConfigRange within(double lo, double hi) {
  return {lo, hi};
}
ConfigRange within_open_lo(double lo, double hi) {
  return {lo, hi, true};
}
ConfigRange half_open(double lo, double hi) {
  return {lo, hi, false, true};
}
ConfigRange open_unit() {
  return {0, 1, true, true};
}

}  // namespace

bool ConfigRange::contains(double v) const {
  const bool above_lo = lo_open ? v > lo : v >= lo;
  const bool below_hi = hi_open ? v < hi : v <= hi;
  return above_lo && below_hi;
}

std::string ConfigRange::str() const {
  const bool bounded_lo = std::isfinite(lo), bounded_hi = std::isfinite(hi);
  if (bounded_lo && bounded_hi)
    return fmt::format("in {}{}, {}{}", lo_open ? "(" : "[", lo, hi, hi_open ? ")" : "]");
  if (bounded_lo) return fmt::format("{} {}", lo_open ? ">" : ">=", lo);
  if (bounded_hi) return fmt::format("{} {}", hi_open ? "<" : "<=", hi);
  return "any number";
}

const std::vector<ConfigKey>& config_schema() {
  using C = JobConfig;
  static const std::vector<ConfigKey> schema = {
      key("job.name", &C::name, "vescale", "Name of the run (used in logs)"),
      key("job.dump_folder", &C::dump_folder, "outputs", "Where metrics.jsonl and checkpoints/ go"),
      key("model.name", &C::model, "gpt", "gpt or mlp"),
      key("model.vocab_size", &C::vocab_size, 256, "GPT vocabulary (text data: 256 bytes)",
          at_least(1)),
      key("model.block_size", &C::block_size, 64, "GPT longest sequence (wpe rows)", at_least(1)),
      key("model.n_layer", &C::n_layer, 2, "GPT blocks", at_least(1)),
      key("model.n_head", &C::n_head, 4, "GPT attention heads", at_least(1)),
      key("model.n_embd", &C::n_embd, 64, "GPT hidden size", at_least(1)),
      key("model.dropout", &C::dropout, 0.0, "GPT dropout probability", half_open(0, 1)),
      key("model.vocab_multiple", &C::vocab_multiple, 64,
          "Vocabulary padded to a multiple of this x tp", within(1, 1 << 20)),
      key("model.d_in", &C::d_in, 64, "MLP input size", at_least(1)),
      key("model.d_hidden", &C::d_hidden, 256, "MLP hidden size", at_least(1)),
      key("model.d_out", &C::d_out, 64, "MLP output size", at_least(1)),
      key("model.n_layers", &C::n_layers, 2, "MLP linear layers (2: fc1, fc2)", at_least(1)),
      key("parallel.pp", &C::pp, 1,
          "Pipeline-parallel ranks (stages are cut from the model's layers)",
          within(1, kMaxMeshDim)),
      key("parallel.dp", &C::dp, 1, "Data-parallel replicas", within(1, kMaxMeshDim)),
      key("parallel.tp", &C::tp, 1, "Tensor-parallel degree", within(1, kMaxMeshDim)),
      key("parallel.tp_shape", &C::tp_shape, {},
          "A 2-D tp mesh tp_a x tp_b ([2, 2], multiplying to parallel.tp) for plans with two "
          "tp placements (gpt/megatron-tp-2d); empty: 1-D"),
      key("parallel.plan", &C::plan, "",
          "Sharding plan: a zoo name (gpt/megatron-sp) or a file; empty: replicate"),
      key("parallel.microbatches", &C::microbatches, 1,
          "Micro-batches per step (gradient accumulation; the pipeline's micro-batches)",
          at_least(1)),
      key("parallel.pp_schedule", &C::pp_schedule, "1f1b",
          "Pipeline schedule: gpipe, 1f1b, interleaved-1f1b, zbv or zb-h1"),
      key("parallel.pp_virtual", &C::pp_virtual, 1,
          "Pipeline stages per pp rank (interleaved-1f1b: 2 or more; zbv: 2)", within(1, 1 << 10)),
      key("parallel.pp_split", &C::pp_split, {"balanced"},
          "Stages: balanced (by estimated cost), or the layers that start stages 2, 3, ... "
          "([\"transformer.h.2\"])"),
      key("parallel.zero", &C::zero, 0,
          "ZeRO over dp: 0 off, 1 optimizer state sharded, 2 and gradients, 3 and parameters "
          "(FSDP)",
          within(0, 3)),
      key("data.source", &C::data_source, "synthetic",
          "synthetic, text (UTF-8 bytes) or tokens (nanoGPT uint16 .bin)"),
      key("data.path", &C::data_path, "",
          "text: a file; tokens: a folder with train.bin and val.bin"),
      key("data.val_fraction", &C::val_fraction, 0.1,
          "text: the last fraction of the file is the validation split", open_unit()),
      key("training.steps", &C::steps, 100, "Optimizer steps", within(1, 1e12)),
      key("training.global_batch_size", &C::global_batch_size, 8,
          "Sequences (or MLP samples) per step, over all dp ranks", at_least(1)),
      key("training.seq_len", &C::seq_len, 64, "GPT tokens per sequence", at_least(1)),
      key("training.seed", &C::seed, 0, "Seed of init, data order and dropout"),
      key("training.device", &C::device, "auto",
          "auto (cuda:LOCAL_RANK when a GPU is visible, else cpu), cpu or cuda"),
      key("training.dtype", &C::dtype, "float32",
          "float32, float64 or bfloat16 (bf16 compute, float32 master weights and state)"),
      key("training.grad_clip", &C::grad_clip, 1.0,
          "Clip the global gradient norm to this (0: off)", at_least(0)),
      key("training.on_nonfinite", &C::on_nonfinite, "stop",
          "A NaN/inf loss or gradient norm: stop (exit 3, nothing saved) or skip the update"),
      key("training.max_skipped", &C::max_skipped, 10,
          "With on_nonfinite = skip: stop after this many skipped steps in a row", within(1, 1e12)),
      key("optimizer.name", &C::optimizer, "adamw", "adamw or sgd"),
      key("optimizer.lr", &C::lr, 3e-4, "Peak learning rate", at_least(0)),
      key("optimizer.beta1", &C::beta1, 0.9, "AdamW beta1", half_open(0, 1)),
      key("optimizer.beta2", &C::beta2, 0.95, "AdamW beta2", half_open(0, 1)),
      key("optimizer.eps", &C::eps, 1e-8, "AdamW epsilon", above(0)),
      key("optimizer.weight_decay", &C::weight_decay, 0.1,
          "Decoupled weight decay (not on biases and norms)", at_least(0)),
      key("optimizer.momentum", &C::momentum, 0.9, "SGD momentum", half_open(0, 1)),
      key("lr_scheduler.warmup_steps", &C::warmup_steps, 0, "Linear warmup steps", within(0, 1e12)),
      key("lr_scheduler.decay", &C::decay, "cosine", "cosine or constant after warmup"),
      key("lr_scheduler.min_lr_ratio", &C::min_lr_ratio, 0.1,
          "Cosine floor as a fraction of optimizer.lr", within(0, 1)),
      key("eval.interval", &C::eval_interval, 0,
          "Evaluate every this many steps (0: only at the end)", within(0, 1e12)),
      key("eval.windows", &C::eval_windows, 8,
          "Validation windows of seq_len tokens (GPT) or batches (MLP)", at_least(1)),
      key("checkpoint.format", &C::checkpoint_format, "sharded",
          "sharded, deduped or merged (HDF5)"),
      key("checkpoint.interval", &C::checkpoint_interval, 0,
          "Save every this many steps (0: never)", within(0, 1e12)),
      key("checkpoint.keep", &C::checkpoint_keep, 3,
          "Committed checkpoints kept; older ones are pruned (0: all)", within(0, 1 << 20)),
      key("checkpoint.async", &C::checkpoint_async, false,
          "Copy the state to host memory and write it in a background thread while training "
          "goes on"),
      key("checkpoint.overwrite", &C::checkpoint_overwrite, false,
          "Delete, before the first step, the committed steps this run would otherwise refuse "
          "to save beside: another run's, or its own newer than the step it resumes from (a "
          "rollback)"),
      key("checkpoint.load", &C::checkpoint_load, "",
          "Resume from: a step folder, a merged .h5, or \"latest\" (the newest committed step "
          "of <dump_folder>/checkpoints; none yet: start from step 0)"),
      key("metrics.log_interval", &C::log_interval, 10,
          "Print and record metrics every this many steps", within(1, 1e12)),
      key("metrics.peak_flops", &C::peak_flops, 0.0,
          "Peak FLOP/s per rank for MFU (0: measured matmul rate)", at_least(0)),
      key("comm.timeout_s", &C::timeout_s, 300.0, "Seconds any collective may take",
          within_open_lo(0, 7 * 24 * 3600)),
      key("comm.backend", &C::backend, "auto", "auto (nccl on CUDA, gloo on cpu), gloo or nccl"),
      key("comm.bucket_mb", &C::bucket_mb, 25.0, "Gradient all-reduce bucket size in MiB",
          within_open_lo(0, 1 << 20)),
  };
  return schema;
}

/// toml_literal, but numbers in their shortest exact form: 0.1, not 0.10000000000000001.
std::string short_literal(const ConfigValue& v) {
  const double* number = std::get_if<double>(&v);
  if (number == nullptr) return toml_literal(v);
  std::string text = fmt::format("{}", *number);
  if (text.find_first_of(".eni") == std::string::npos) text += ".0";
  return text;
}

std::string value_text(const JobConfig& c, const ConfigKey& k) {
  return std::visit([&](auto field) { return short_literal(ConfigValue(c.*field)); }, k.field);
}

std::map<std::string, std::string> recorded_values(const std::string& toml_text) {
  toml::table doc;
  try {
    doc = toml::parse(toml_text);
  } catch (const toml::parse_error&) {
    return {};
  }
  std::map<std::string, std::string> out;
  for (const auto& k : config_schema()) {
    const size_t dot = k.name.find('.');
    const toml::table* section = doc[k.name.substr(0, dot)].as_table();
    const toml::node* node = section ? section->get(k.name.substr(dot + 1)) : nullptr;
    std::optional<ConfigValue> value = node ? from_node(*node, k.default_value) : std::nullopt;
    out[k.name] = short_literal(value.value_or(k.default_value));
  }
  return out;
}

std::vector<std::string> collect_overrides(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    VS_USER_CHECK(a.rfind("--", 0) == 0 && a.find('.') != std::string::npos,
                  "unexpected argument '{}': overrides look like --section.key=value", a);
    if (a.find('=') != std::string::npos) {
      out.push_back(a.substr(2));
    } else {
      VS_USER_CHECK(i + 1 < args.size(), "override {} needs a value", a);
      out.push_back(a.substr(2) + "=" + args[++i]);
    }
  }
  return out;
}

JobConfig JobConfig::load(const std::string& path, const std::vector<std::string>& overrides) {
  const std::string text = read_input_file(path, "config");
  // An empty file is more likely a truncated copy or the wrong path than a wish for defaults.
  VS_USER_CHECK(!text.empty(),
                "config {} is empty: write the keys that differ from the defaults (see `train "
                "CONFIG --print-config` and configs/ for examples)",
                path);
  return parse(text, path, overrides);
}

JobConfig JobConfig::parse(const std::string& toml_text, const std::string& source,
                           const std::vector<std::string>& overrides) {
  Values values = default_values();
  read_document(parse_document(toml_text, source), source, values);
  apply_overrides(overrides, values);
  JobConfig c = bind_fields(values);
  c.source = source;
  c.text = effective_text(values, false);
  c.annotated_text = effective_text(values, true);
  check_values(c);
  check_combinations(c);
  check_fits_memory(c, physical_memory_bytes());
  return c;
}

}  // namespace vescale
