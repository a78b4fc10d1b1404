#include "config/job_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <toml++/toml.h>
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <type_traits>

#include "config/config_checks.h"
#include "config/config_schema.h"
#include "config/memory_estimate.h"
#include "config/toml_value.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/suggest.h"

namespace vescale {
namespace {

/// Every key's value, and which of them the file or an override set.
struct Values {
  std::map<std::string, ConfigValue> by_name;
  std::set<std::string> given;
  std::string dp_auto_at;  ///< where parallel.dp = "auto" was set ("" when it was not)
};

/// The key whose value may be "auto", and its one such value (NOTE [Elastic training]).
constexpr const char* kAutoDp = "parallel.dp";

/// Takes parallel.dp = "auto" (which the key's integer type cannot hold): true when it was.
bool take_auto(Values& values, const std::string& name, const std::string& at, bool is_auto) {
  if (name != kAutoDp) return false;
  values.dp_auto_at = is_auto ? at : "";
  if (is_auto) values.given.insert(name);
  return is_auto;
}

/// parallel.dp = "auto": dp = world / (pp x cp x tp), on `world` ranks.
void resolve_auto_dp(Values& values, int64_t world) {
  if (values.dp_auto_at.empty()) return;
  const std::string& at = values.dp_auto_at;
  VS_USER_CHECK(world > 0,
                "{}: parallel.dp = \"auto\" takes dp from the number of ranks: start the job "
                "under a launcher (torchrun, srun, mpirun) or with train --nproc N",
                at);
  const int64_t pp = std::get<int64_t>(values.by_name.at("parallel.pp"));
  const int64_t cp = std::get<int64_t>(values.by_name.at("parallel.cp"));
  const int64_t tp = std::get<int64_t>(values.by_name.at("parallel.tp"));
  VS_USER_CHECK(world % (pp * cp * tp) == 0,
                "{}: parallel.dp = \"auto\" on {} ranks: {} is not a multiple of parallel.pp x "
                "cp x tp = {} x {} x {}",
                at, world, world, pp, cp, tp);
  values.by_name[kAutoDp] = world / (pp * cp * tp);
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

std::string effective_text(const Values& values, bool with_help) {
  const auto& model = std::get<std::string>(values.by_name.at("model.name"));
  std::string out, section;
  for (const auto& k : config_schema()) {
    if (!k.applies_to(model)) continue;
    const std::string s = k.name.substr(0, k.name.find('.'));
    if (s != section) {
      out += fmt::format("{}[{}]\n", out.empty() ? "" : "\n", s);
      section = s;
    }
    const std::string line = fmt::format("{} = {}", k.name.substr(k.name.find('.') + 1),
                                         toml_literal(values.by_name.at(k.name)));
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
    text = number_text(*d);
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
  // An integer key's value may be a number all the same: too large for 64 bits, or 1e30.
  const bool integer = std::holds_alternative<int64_t>(k->default_value) && name != kAutoDp;
  VS_USER_CHECK(
      parsed.has_value(), "{}: key '{}' must be {}{}{}", at, name, type_name(k->default_value),
      integer
          ? fmt::format(", a whole number written in digits from {} to {}",
                        std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max())
          : "",
      name == kAutoDp ? " or \"auto\" (NOTE [Elastic training])" : "");
  const double* number = std::get_if<double>(&*parsed);
  VS_USER_CHECK(number == nullptr || std::isfinite(*number),
                "{}: key '{}' must be a finite number, got {}", at, name,
                number == nullptr ? 0.0 : *number);
  // Numbers reach float32 tensors (a learning rate of 1e39 would overflow after start-up).
  VS_USER_CHECK(number == nullptr || std::abs(*number) <= std::numeric_limits<float>::max(),
                "{}: key '{}' = {} is beyond float32's range (at most {:.2g})", at, name,
                number == nullptr ? 0.0 : *number, std::numeric_limits<float>::max());
  check_range(*k, *parsed, at);
  values.by_name[name] = *parsed;
  values.given.insert(name);
}

Values default_values() {
  Values values;
  for (const auto& k : config_schema())
    values.by_name[k.name] = k.default_value;
  return values;
}

/// The default of key `k` in a job of the family `model`: that family's, where it declares the
/// key (families may share a key and differ in its default).
ConfigValue default_for(const ConfigKey& k, const std::string& model) {
  if (k.families.empty() || !k.applies_to(model)) return k.default_value;
  for (const FamilyKey& fk : model_family(model).keys())
    if ("model." + fk.name == k.name) return fk.default_value;
  return k.default_value;
}

/// The job's family's defaults for the keys the config left unset, and no key that only other
/// families read. An unknown model.name is left to check_values, which lists the families.
void apply_family(Values& values, const std::string& source) {
  const auto& model = std::get<std::string>(values.by_name.at("model.name"));
  const std::vector<std::string> names = model_family_names();
  if (std::find(names.begin(), names.end(), model) == names.end()) return;
  for (const auto& k : config_schema()) {
    if (values.given.count(k.name) == 0) {
      values.by_name[k.name] = default_for(k, model);
      continue;
    }
    VS_USER_CHECK(k.applies_to(model),
                  "config {}: {} is a key of model.name = \"{}\", but this job's model.name = "
                  "\"{}\" (remove it, or set model.name = \"{}\")",
                  source, k.name, fmt::join(k.families, "\" or \""), model, k.families.at(0));
  }
}

/// optimizer.momentum is SGD's and Muon's, whose defaults differ: Muon's where the key is unset
/// (NOTE [Muon]). A key of another optimizer than the job's, set to other than its default, is
/// refused: it would change nothing (a recorded config, every key at its value, passes).
void apply_optimizer_defaults(Values& values, const std::string& source) {
  constexpr const char* kMomentum = "optimizer.momentum";
  constexpr double kMuonMomentum = 0.95;
  const std::string& name = std::get<std::string>(values.by_name.at("optimizer.name"));
  const bool muon = name == config_name(OptimizerKind::kMuon);
  const std::pair<const char*, std::vector<OptimizerKind>> owned[] = {
      {kMomentum, {OptimizerKind::kSgd, OptimizerKind::kMuon}},
      {"optimizer.nesterov", {OptimizerKind::kMuon}},
      {"optimizer.ns_steps", {OptimizerKind::kMuon}},
      {"optimizer.muon_scale", {OptimizerKind::kMuon}},
      {"optimizer.adamw_params", {OptimizerKind::kMuon}}};
  for (const auto& [key, owners] : owned) {
    std::vector<std::string> names;
    for (const OptimizerKind kind : owners)
      names.push_back(config_name(kind));
    if (!values.given.count(key) || std::find(names.begin(), names.end(), name) != names.end())
      continue;
    const auto schema = std::find_if(config_schema().begin(), config_schema().end(),
                                     [&key = key](const ConfigKey& k) { return k.name == key; });
    VS_USER_CHECK(
        schema == config_schema().end() || values.by_name.at(key) == schema->default_value,
        "config {}: {} is a key of optimizer.name = \"{}\", and this job's optimizer "
        "is \"{}\", which would not read it (remove it, or set optimizer.name = \"{}\")",
        source, key, fmt::join(names, "\" or \""), name, names.back());
  }
  if (muon && values.given.count(kMomentum) == 0) values.by_name[kMomentum] = kMuonMomentum;
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
      const std::string name = fmt::format("{}.{}", section.str(), key.str());
      const std::string at = fmt::format("config {}:{}", source, entry.source().begin.line);
      if (take_auto(values, name, at, entry.value<std::string>() == "auto")) continue;
      set_value(values, name, at,
                [&entry](const ConfigValue& like) { return from_node(entry, like); });
    }
  }
}

/// "section.key=value" items into `values`.
void apply_overrides(const std::vector<std::string>& overrides, Values& values) {
  for (const auto& item : overrides) {
    const size_t eq = item.find('=');
    VS_USER_CHECK(eq != std::string::npos, "override --{}: expected --section.key=value", item);
    const std::string text = item.substr(eq + 1);
    const std::string at = fmt::format("override --{}", item);
    if (take_auto(values, item.substr(0, eq), at, text == "auto" || text == "\"auto\"")) continue;
    set_value(values, item.substr(0, eq), at,
              [&](const ConfigValue& like) { return from_text(text, like); });
  }
}

/// An enumerated key's value, a name of its table; otherwise a one-line error naming the key and
/// the names, with the nearest.
template <typename E>
E parse_choice(const ConfigKey& k, const std::string& text, const std::string& source) {
  const EnumNames<E>& names = names_of(E{});
  const std::optional<E> value = names.find(text);
  VS_USER_CHECK(value.has_value(), "config {}: {} = \"{}\" is not one of {}{}", source, k.name,
                text, fmt::join(names.names(), ", "), did_you_mean(text, names.names()));
  return *value;
}

/// Every key's value stored in its JobConfig field: an enumerated key's name parsed, here only.
JobConfig bind_fields(const Values& values, const std::string& source) {
  JobConfig c;
  for (const auto& k : config_schema()) {
    const ConfigValue& value = values.by_name.at(k.name);
    std::visit(
        [&](const auto& field) {
          using F = std::decay_t<decltype(field)>;
          if constexpr (std::is_same_v<F, ModelKeyField>) {
            c.model_keys.set(field.name, value);
          } else {
            using T = std::decay_t<decltype(c.*field)>;
            if constexpr (std::is_enum_v<T>) {
              c.*field = parse_choice<T>(k, std::get<std::string>(value), source);
            } else {
              c.*field = std::get<T>(value);
            }
          }
        },
        k.field);
  }
  return c;
}

}  // namespace

std::string parallel_mesh_text(int64_t pp, int64_t dp, int64_t cp, int64_t tp, int64_t ep) {
  const MeshDims dims = job_mesh_dims({{"pp", pp}, {"dp", dp}, {"cp", cp}}, {tp});
  return fmt::format("parallel.{} = {}{}", dim_names_text(dims), dim_sizes_text(dims),
                     ep > 1 ? fmt::format(", ep = {}", ep) : "");
}

std::string JobConfig::mesh_text() const {
  return parallel_mesh_text(pp, dp, cp, tp, ep);
}

MeshDims JobConfig::mesh_dims() const {
  const int64_t from_dp = std::gcd(ep, dp);
  return job_mesh_dims({{"pp", pp},
                        {"dp", dp / from_dp},
                        {"ep", from_dp},
                        {"cp", cp / (ep / from_dp)},
                        {"cp_ep", ep / from_dp}},
                       tp_dims());
}

ModelSpec JobConfig::model_spec() const {
  return {source, model_keys, tp,    seq_len, static_cast<uint64_t>(seed), fused_projections,
          cp,     ep,         lora()};
}

std::map<std::string, std::string> recorded_values(const std::string& toml_text) {
  toml::table doc;
  try {
    doc = toml::parse(toml_text);
  } catch (const toml::parse_error&) {
    return {};
  }
  const std::string model = doc["model"]["name"].value_or(model_family_names().front());
  std::map<std::string, std::string> out;
  for (const auto& k : config_schema()) {
    const size_t dot = k.name.find('.');
    const toml::table* section = doc[k.name.substr(0, dot)].as_table();
    const toml::node* node = section ? section->get(k.name.substr(dot + 1)) : nullptr;
    std::optional<ConfigValue> value = node ? from_node(*node, k.default_value) : std::nullopt;
    // default_for gives the schema's default for a model.name no family has.
    out[k.name] = toml_literal(value.value_or(default_for(k, model)));
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

Recompute JobConfig::recompute_of_block(int64_t block) const {
  if ((block + 1) % activation_checkpoint_every != 0) return Recompute::kNone;
  return activation_checkpoint;
}

double JobConfig::recomputed_share() const {
  return activation_checkpoint == Recompute::kNone
             ? 0.0
             : 1.0 / static_cast<double>(activation_checkpoint_every);
}

JobConfig JobConfig::load(const std::string& path, const std::vector<std::string>& overrides,
                          int64_t world) {
  const std::string text = read_input_file(path, "config");
  // An empty file is more likely a truncated copy or the wrong path than a wish for defaults.
  VS_USER_CHECK(!text.empty(),
                "config {} is empty: write the keys that differ from the defaults (see `train "
                "CONFIG --print-config` and configs/ for examples)",
                path);
  return parse(text, path, overrides, world);
}

JobConfig JobConfig::parse(const std::string& toml_text, const std::string& source,
                           const std::vector<std::string>& overrides, int64_t world) {
  Values values = default_values();
  read_document(parse_document(toml_text, source), source, values);
  apply_overrides(overrides, values);
  apply_family(values, source);
  apply_optimizer_defaults(values, source);
  resolve_auto_dp(values, world);
  JobConfig c = bind_fields(values, source);
  c.dp_auto = !values.dp_auto_at.empty();
  c.source = source;
  c.text = effective_text(values, false);
  c.annotated_text = effective_text(values, true);
  check_values(c);
  check_combinations(c);
  check_fits_memory(c, physical_memory_bytes());
  return c;
}

}  // namespace vescale
