#include "config/job_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <toml++/toml.h>
#include <cmath>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/suggest.h"

namespace vescale {
namespace {

using Values = std::map<std::string, ConfigValue>;

const char* type_name(const ConfigValue& v) {
  switch (v.index()) {
    case 0:
      return "an integer";
    case 1:
      return "a number";
    case 2:
      return "true or false";
    default:
      return "a string";
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
  const auto near = near_matches(name, names, 1);
  return fmt::format("unknown key '{}'{}", name,
                     near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near[0]));
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
    default:
      if (auto v = node.value_exact<std::string>()) return ConfigValue(*v);
      return std::nullopt;
  }
}

/// A command-line value as the schema's type, or nullopt.
std::optional<ConfigValue> from_text(const std::string& text, const ConfigValue& like) {
  if (like.index() == 3) {
    const bool quoted = text.size() >= 2 && (text.front() == '"' || text.front() == '\'') &&
                        text.back() == text.front();
    return ConfigValue(quoted ? text.substr(1, text.size() - 2) : text);
  }
  try {
    auto table = toml::parse("v = " + text);
    if (auto node = table.get("v")) return from_node(*node, like);
  } catch (const toml::parse_error&) {
  }
  return std::nullopt;
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
    default: {
      std::ostringstream out;
      out << toml::value<std::string>(std::get<std::string>(v));
      return out.str();
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
    out += with_help ? fmt::format("{:<36} # {}\n", line, k.help) : line + "\n";
  }
  return out;
}

template <typename T>
T get(const Values& values, const std::string& name) {
  return std::get<T>(values.at(name));
}

}  // namespace

const std::vector<ConfigKey>& config_schema() {
  static const std::vector<ConfigKey> schema = {
      {"job.name", std::string("vescale"), "Name of the run (used in logs)"},
      {"job.dump_folder", std::string("outputs"), "Where metrics.jsonl and checkpoints/ go"},
      {"model.name", std::string("gpt"), "gpt or mlp"},
      {"model.vocab_size", int64_t{256}, "GPT vocabulary (text data: 256 bytes)"},
      {"model.block_size", int64_t{64}, "GPT longest sequence (wpe rows)"},
      {"model.n_layer", int64_t{2}, "GPT blocks"},
      {"model.n_head", int64_t{4}, "GPT attention heads"},
      {"model.n_embd", int64_t{64}, "GPT hidden size"},
      {"model.dropout", 0.0, "GPT dropout probability"},
      {"model.vocab_multiple", int64_t{64}, "Vocabulary padded to a multiple of this x tp"},
      {"model.d_in", int64_t{64}, "MLP input size"},
      {"model.d_hidden", int64_t{256}, "MLP hidden size"},
      {"model.d_out", int64_t{64}, "MLP output size"},
      {"model.n_layers", int64_t{2}, "MLP linear layers (2: fc1, fc2)"},
      {"parallel.pp", int64_t{1}, "Pipeline stages (only 1 today)"},
      {"parallel.dp", int64_t{1}, "Data-parallel replicas"},
      {"parallel.tp", int64_t{1}, "Tensor-parallel degree"},
      {"parallel.plan", std::string(""),
       "Sharding plan: a zoo name (gpt/megatron-sp) or a file; empty: replicate"},
      {"parallel.microbatches", int64_t{1}, "Gradient-accumulation micro-batches per step"},
      {"data.source", std::string("synthetic"),
       "synthetic, text (UTF-8 bytes) or tokens (nanoGPT uint16 .bin)"},
      {"data.path", std::string(""), "text: a file; tokens: a folder with train.bin and val.bin"},
      {"data.val_fraction", 0.1, "text: the last fraction of the file is the validation split"},
      {"training.steps", int64_t{100}, "Optimizer steps"},
      {"training.global_batch_size", int64_t{8},
       "Sequences (or MLP samples) per step, over all dp ranks"},
      {"training.seq_len", int64_t{64}, "GPT tokens per sequence"},
      {"training.seed", int64_t{0}, "Seed of init, data order and dropout"},
      {"training.dtype", std::string("float32"), "float32 or float64"},
      {"training.grad_clip", 1.0, "Clip the global gradient norm to this (0: off)"},
      {"optimizer.name", std::string("adamw"), "adamw or sgd"},
      {"optimizer.lr", 3e-4, "Peak learning rate"},
      {"optimizer.beta1", 0.9, "AdamW beta1"},
      {"optimizer.beta2", 0.95, "AdamW beta2"},
      {"optimizer.eps", 1e-8, "AdamW epsilon"},
      {"optimizer.weight_decay", 0.1, "Decoupled weight decay (not on biases and norms)"},
      {"optimizer.momentum", 0.9, "SGD momentum"},
      {"lr_scheduler.warmup_steps", int64_t{0}, "Linear warmup steps"},
      {"lr_scheduler.decay", std::string("cosine"), "cosine or constant after warmup"},
      {"lr_scheduler.min_lr_ratio", 0.1, "Cosine floor as a fraction of optimizer.lr"},
      {"eval.interval", int64_t{0}, "Evaluate every this many steps (0: only at the end)"},
      {"eval.windows", int64_t{8}, "Validation windows of seq_len tokens (GPT) or batches (MLP)"},
      {"checkpoint.format", std::string("sharded"), "sharded, deduped or merged (HDF5)"},
      {"checkpoint.interval", int64_t{0}, "Save every this many steps (0: never)"},
      {"checkpoint.keep", int64_t{3}, "Committed checkpoints kept; older ones are pruned (0: all)"},
      {"checkpoint.load", std::string(""),
       "Resume from: a step folder, a merged .h5, or \"latest\" "
       "(<dump_folder>/checkpoints/latest)"},
      {"metrics.log_interval", int64_t{10}, "Print and record metrics every this many steps"},
      {"metrics.peak_flops", 0.0, "Peak FLOP/s per rank for MFU (0: measured matmul rate)"},
      {"comm.timeout_s", 300.0, "Seconds any collective may take"},
      {"comm.backend", std::string("auto"), "auto, gloo or nccl"},
      {"comm.bucket_mb", 25.0, "Gradient all-reduce bucket size in MiB"},
  };
  return schema;
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
  std::ifstream in(path);
  VS_USER_CHECK(in.good(), "config {}: cannot read the file", path);
  std::stringstream text;
  text << in.rdbuf();
  return parse(text.str(), path, overrides);
}

JobConfig JobConfig::parse(const std::string& toml_text, const std::string& source,
                           const std::vector<std::string>& overrides) {
  Values values;
  for (const auto& k : config_schema())
    values[k.name] = k.default_value;
  toml::table doc;
  try {
    doc = toml::parse(toml_text, source);
  } catch (const toml::parse_error& e) {
    throw UserError(fmt::format("config {}:{}: not valid TOML: {}", source, e.source().begin.line,
                                e.description()));
  }
  for (const auto& [section, node] : doc) {
    const int line = static_cast<int>(node.source().begin.line);
    const toml::table* table = node.as_table();
    VS_USER_CHECK(table != nullptr, "config {}:{}: '{}' must be a [section]", source, line,
                  section.str());
    for (const auto& [key, value] : *table) {
      const std::string name = fmt::format("{}.{}", section.str(), key.str());
      const int kline = static_cast<int>(value.source().begin.line);
      const ConfigKey* k = find_key(name);
      VS_USER_CHECK(k != nullptr, "config {}:{}: {}", source, kline, unknown_key_message(name));
      auto parsed = from_node(value, k->default_value);
      VS_USER_CHECK(parsed.has_value(), "config {}:{}: key '{}' must be {}", source, kline, name,
                    type_name(k->default_value));
      values[name] = *parsed;
    }
  }
  for (const auto& item : overrides) {
    const size_t eq = item.find('=');
    VS_USER_CHECK(eq != std::string::npos, "override --{}: expected --section.key=value", item);
    const std::string name = item.substr(0, eq);
    const ConfigKey* k = find_key(name);
    VS_USER_CHECK(k != nullptr, "override --{}: {}", item, unknown_key_message(name));
    auto parsed = from_text(item.substr(eq + 1), k->default_value);
    VS_USER_CHECK(parsed.has_value(), "override --{}: key '{}' must be {}", item, name,
                  type_name(k->default_value));
    values[name] = *parsed;
  }

  JobConfig c;
  c.source = source;
  c.name = get<std::string>(values, "job.name");
  c.dump_folder = get<std::string>(values, "job.dump_folder");
  c.model = get<std::string>(values, "model.name");
  c.vocab_size = get<int64_t>(values, "model.vocab_size");
  c.block_size = get<int64_t>(values, "model.block_size");
  c.n_layer = get<int64_t>(values, "model.n_layer");
  c.n_head = get<int64_t>(values, "model.n_head");
  c.n_embd = get<int64_t>(values, "model.n_embd");
  c.dropout = get<double>(values, "model.dropout");
  c.vocab_multiple = get<int64_t>(values, "model.vocab_multiple");
  c.d_in = get<int64_t>(values, "model.d_in");
  c.d_hidden = get<int64_t>(values, "model.d_hidden");
  c.d_out = get<int64_t>(values, "model.d_out");
  c.n_layers = get<int64_t>(values, "model.n_layers");
  c.pp = get<int64_t>(values, "parallel.pp");
  c.dp = get<int64_t>(values, "parallel.dp");
  c.tp = get<int64_t>(values, "parallel.tp");
  c.plan = get<std::string>(values, "parallel.plan");
  c.microbatches = get<int64_t>(values, "parallel.microbatches");
  c.data_source = get<std::string>(values, "data.source");
  c.data_path = get<std::string>(values, "data.path");
  c.val_fraction = get<double>(values, "data.val_fraction");
  c.steps = get<int64_t>(values, "training.steps");
  c.global_batch_size = get<int64_t>(values, "training.global_batch_size");
  c.seq_len = get<int64_t>(values, "training.seq_len");
  c.seed = get<int64_t>(values, "training.seed");
  c.dtype = get<std::string>(values, "training.dtype");
  c.grad_clip = get<double>(values, "training.grad_clip");
  c.optimizer = get<std::string>(values, "optimizer.name");
  c.lr = get<double>(values, "optimizer.lr");
  c.beta1 = get<double>(values, "optimizer.beta1");
  c.beta2 = get<double>(values, "optimizer.beta2");
  c.eps = get<double>(values, "optimizer.eps");
  c.weight_decay = get<double>(values, "optimizer.weight_decay");
  c.momentum = get<double>(values, "optimizer.momentum");
  c.warmup_steps = get<int64_t>(values, "lr_scheduler.warmup_steps");
  c.decay = get<std::string>(values, "lr_scheduler.decay");
  c.min_lr_ratio = get<double>(values, "lr_scheduler.min_lr_ratio");
  c.eval_interval = get<int64_t>(values, "eval.interval");
  c.eval_windows = get<int64_t>(values, "eval.windows");
  c.checkpoint_format = get<std::string>(values, "checkpoint.format");
  c.checkpoint_interval = get<int64_t>(values, "checkpoint.interval");
  c.checkpoint_keep = get<int64_t>(values, "checkpoint.keep");
  c.checkpoint_load = get<std::string>(values, "checkpoint.load");
  c.log_interval = get<int64_t>(values, "metrics.log_interval");
  c.peak_flops = get<double>(values, "metrics.peak_flops");
  c.timeout_s = get<double>(values, "comm.timeout_s");
  c.backend = get<std::string>(values, "comm.backend");
  c.bucket_mb = get<double>(values, "comm.bucket_mb");
  c.text = effective_text(values, false);
  c.annotated_text = effective_text(values, true);

  // Values and combinations.
  auto one_of = [&](const std::string& key, const std::string& value,
                    std::vector<std::string> allowed) {
    VS_USER_CHECK(std::find(allowed.begin(), allowed.end(), value) != allowed.end(),
                  "config {}: {} = \"{}\" is not one of {}", source, key, value,
                  fmt::join(allowed, ", "));
  };
  one_of("model.name", c.model, {"gpt", "mlp"});
  one_of("data.source", c.data_source, {"synthetic", "text", "tokens"});
  one_of("training.dtype", c.dtype, {"float32", "float64"});
  one_of("optimizer.name", c.optimizer, {"adamw", "sgd"});
  one_of("lr_scheduler.decay", c.decay, {"cosine", "constant"});
  one_of("comm.backend", c.backend, {"auto", "gloo", "nccl"});
  one_of("checkpoint.format", c.checkpoint_format, {"sharded", "deduped", "merged"});
  auto positive = [&](const std::string& key, int64_t v) {
    VS_USER_CHECK(v >= 1, "config {}: {} = {} must be at least 1", source, key, v);
  };
  positive("parallel.pp", c.pp);
  positive("parallel.dp", c.dp);
  positive("parallel.tp", c.tp);
  positive("parallel.microbatches", c.microbatches);
  positive("training.steps", c.steps);
  positive("training.global_batch_size", c.global_batch_size);
  positive("training.seq_len", c.seq_len);
  positive("metrics.log_interval", c.log_interval);
  VS_USER_CHECK(c.pp == 1,
                "config {}: parallel.pp = {}: pipeline parallelism is not available yet; use 1",
                source, c.pp);
  VS_USER_CHECK(c.global_batch_size % (c.dp * c.microbatches) == 0,
                "config {}: training.global_batch_size = {} is not divisible by parallel.dp x "
                "parallel.microbatches "
                "= {} x {}",
                source, c.global_batch_size, c.dp, c.microbatches);
  VS_USER_CHECK(c.model != "gpt" || c.seq_len <= c.block_size,
                "config {}: training.seq_len = {} is longer than model.block_size = {}", source,
                c.seq_len, c.block_size);
  VS_USER_CHECK(c.data_source == "synthetic" || !c.data_path.empty(),
                "config {}: data.source = \"{}\" needs data.path", source, c.data_source);
  VS_USER_CHECK(c.model == "gpt" || c.data_source == "synthetic",
                "config {}: model.name = \"mlp\" trains on data.source = \"synthetic\" only",
                source);
  VS_USER_CHECK(c.val_fraction > 0 && c.val_fraction < 1,
                "config {}: data.val_fraction = {} must be in (0, 1)", source, c.val_fraction);
  return c;
}

}  // namespace vescale
