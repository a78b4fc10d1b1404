#include "dmodule/parallelize.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <map>
#include <set>

#include "core/error.h"
#include "core/suggest.h"
#include "core/units.h"
#include "dmodule/fqn_glob.h"

namespace vescale {
namespace {

/// "transformer.h.3.attn" -> "transformer.h.*.attn": how a suggestion should look in a plan.
std::string generalized(const std::string& fqn) {
  std::string out, segment;
  auto flush = [&] {
    const bool number =
        !segment.empty() && segment.find_first_not_of("0123456789") == std::string::npos;
    out += number ? "*" : segment;
    segment.clear();
  };
  for (char c : fqn) {
    if (c == '.') {
      flush();
      out += '.';
    } else {
      segment += c;
    }
  }
  flush();
  return out;
}

std::string suggestion(const std::string& key, const std::vector<std::string>& names) {
  std::vector<std::string> candidates;
  for (const auto& n : names) {
    candidates.push_back(n);
    candidates.push_back(generalized(n));
  }
  return did_you_mean(key, candidates);
}

std::string shape_str(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

/// The model's type in lower case ("gpt"), checked against the model the plan was written for.
std::string checked_model_name(const Plan& plan, const Module& module) {
  std::string model_name = module.type();
  std::transform(model_name.begin(), model_name.end(), model_name.begin(), ::tolower);
  VS_USER_CHECK(plan.model.empty() || plan.model == model_name,
                "plan {}: written for model '{}', but the model is '{}'", plan.source, plan.model,
                model_name);
  return model_name;
}

/// Throws unless plan key `key` (at `at`) gives one placement per mesh dim.
void check_one_per_mesh_dim(const Placements& placements, const std::string& at,
                            const std::string& key, const DeviceMesh& mesh) {
  VS_USER_CHECK(static_cast<int>(placements.size()) == mesh.ndim(),
                "plan {}: key '{}' gives {} placements {} but the mesh {} has {} dims (a job's tp "
                "mesh is 2-D with parallel.tp_shape = [tp_a, tp_b], else 1-D)",
                at, key, placements.size(), placements_str(placements), mesh.str(), mesh.ndim());
}

/// The placements of `rule` checked against parameter `fqn` and normalized for its shape.
Placements checked_placements(const PlanParameterRule& rule, const std::string& at,
                              const std::string& fqn, const Parameter& p) {
  const int64_t ndim = static_cast<int64_t>(p.shape.size());
  for (const auto& placement : rule.placements) {
    VS_USER_CHECK(!placement.is_partial(),
                  "plan {}: key '{}': a parameter cannot be {} (use R or S(d))", at, rule.key,
                  placement.str());
    VS_USER_CHECK(!placement.is_shard() || (placement.dim >= -ndim && placement.dim < ndim),
                  "plan {}: key '{}': {} does not fit parameter {} of shape {}", at, rule.key,
                  placement.str(), fqn, shape_str(p.shape));
  }
  Placements normalized;
  for (const auto& placement : rule.placements)
    normalized.push_back(placement.normalized(p.shape.size()));
  return normalized;
}

/// Gives `target` (parameter `fqn`) the placements of `rule`, with a warning when that overrides
/// other placements from another key.
void apply_parameter_rule(const PlanParameterRule& rule, const std::string& at,
                          const std::string& fqn, const Parameter& p, ParamPlacement& target,
                          std::vector<std::string>& warnings) {
  const Placements placements = checked_placements(rule, at, fqn, p);
  if (!target.key.empty() && target.key != rule.key && target.placements != placements) {
    warnings.push_back(fmt::format(
        "plan {}: key '{}' overrides key '{}' for parameter {} ({} -> {})", at, rule.key,
        target.key, fqn, placements_str(target.placements), placements_str(placements)));
  }
  target.placements = placements;
  target.key = rule.key;
}

// NOTE [LoRA placements]
// A low-rank adapter's factors follow the weight W [out, in] they adapt, mesh dim by mesh dim, so
// that x A^T B^T has W's output placements with no communication of its own (Megatron's
// column- and row-parallel LoRA): where W is S(0) (column-parallel: each rank its output rows)
// B [out, r] is S(0) and A [r, in] whole; where W is S(1) (row-parallel: each rank its input
// columns) A is S(1), its product a partial sum like W's, and B whole; where W is R, both are.
// A plan names the base weights only: a rule that matches a factor is overridden.

/// The placements of adapter factor `adapter` of a weight placed at `base`.
Placements adapter_placements(const AdapterOf& adapter, const Placements& base) {
  Placements out;
  for (const Placement& p : base) {
    const bool a = adapter.factor == AdapterOf::Factor::kA;
    const bool keep = p.is_shard() && ((p.dim == 0 && !a) || (p.dim == 1 && a));
    out.push_back(keep ? p : Placement::replicate());
  }
  return out;
}

/// Every parameter Replicate, then each rule on the parameters it matches: later keys override
/// earlier ones; a tied parameter's names must agree. Adapters follow their bases.
void place_parameters(const Plan& plan, Module& module, const DeviceMesh& mesh,
                      const std::string& model_name, ResolvedPlan& out) {
  const auto names = module.all_parameter_names();
  std::vector<std::string> fqns;
  for (const auto& n : names)
    fqns.push_back(n.first);
  std::map<const Parameter*, size_t> index_of;
  for (const auto& [fqn, p] : module.named_parameters()) {
    index_of[p.get()] = out.parameters.size();
    out.parameters.push_back({fqn, p->shape, Placements(mesh.ndim(), Placement::replicate()), ""});
  }
  for (const auto& rule : plan.parameter) {
    const std::string at = plan_location(plan.source, rule.line);
    check_one_per_mesh_dim(rule.placements, at, rule.key, mesh);
    bool matched = false;
    for (const auto& [fqn, p] : names) {
      if (!fqn_matches(rule.key, fqn)) continue;
      matched = true;
      apply_parameter_rule(rule, at, fqn, *p, out.parameters[index_of.at(p.get())], out.warnings);
    }
    VS_USER_CHECK(matched, "plan {}: key '{}' matches no parameter of {}{}", at, rule.key,
                  model_name, suggestion(rule.key, fqns));
  }
  for (const auto& [fqn, p] : module.named_parameters()) {
    if (!p->adapter) continue;
    ParamPlacement& target = out.parameters[index_of.at(p.get())];
    const ParamPlacement& base = out.parameters[index_of.at(p->adapter->base)];
    target.placements = adapter_placements(*p->adapter, base.placements);
    target.key = "(follows " + base.fqn + ")";
  }
}

/// A warning for each parameter sharded over a mesh dim larger than its own dim.
void warn_small_shards(const std::string& source, const DeviceMesh& mesh, ResolvedPlan& out) {
  for (const auto& p : out.parameters) {
    for (int i = 0; i < mesh.ndim(); ++i) {
      const Placement& pl = p.placements[i];
      if (pl.is_shard() && p.shape[pl.dim] < mesh.size(i)) {
        out.warnings.push_back(fmt::format(
            "plan {}: parameter {} of shape {} has dim {} smaller than mesh dim {} "
            "({}): some ranks hold empty shards",
            source, p.fqn, shape_str(p.shape), pl.dim, mesh.dim_names()[i], mesh.size(i)));
      }
    }
  }
}

/// Module `name`'s hook from `rule`, replacing (with a warning) one an earlier key gave it.
void add_hook(const PlanForwardRule& rule, const std::string& at, const std::string& name,
              const DeviceMesh& mesh, ResolvedPlan& out) {
  for (const auto& placements : rule.placements)
    check_one_per_mesh_dim(placements, at, rule.key, mesh);
  auto existing = std::find_if(out.hooks.begin(), out.hooks.end(), [&](const auto& h) {
    return h.module == name && h.input == rule.input;
  });
  if (existing != out.hooks.end()) {
    out.warnings.push_back(fmt::format("plan {}: key '{}' overrides key '{}' for module '{}'", at,
                                       rule.key, existing->key, name));
    out.hooks.erase(existing);
  }
  out.hooks.push_back({name, rule.input, rule.placements, rule.key});
}

/// Each forward rule as hooks on the modules it matches.
void resolve_hooks(const Plan& plan, Module& module, const DeviceMesh& mesh,
                   const std::string& model_name, ResolvedPlan& out) {
  std::vector<std::string> module_names;
  for (const auto& [fqn, m] : module.named_modules())
    module_names.push_back(fqn);
  for (const auto& rule : plan.forward) {
    const std::string at = plan_location(plan.source, rule.line);
    bool matched = false;
    for (const auto& name : module_names) {
      if (!(rule.module.empty() ? name.empty() : fqn_matches(rule.module, name))) continue;
      matched = true;
      add_hook(rule, at, name, mesh, out);
    }
    VS_USER_CHECK(matched, "plan {}: forward key '{}' matches no module of {}{}", at, rule.key,
                  model_name, suggestion(rule.module, module_names));
  }
}

}  // namespace

Plan replicate_plan(const std::string& model) {
  Plan plan;
  plan.source = "(replicate everything)";
  plan.model = model;
  plan.description = "every parameter Replicate, no resharding";
  return plan;
}

ResolvedPlan resolve_plan(const Plan& plan, Module& module, const DeviceMesh& mesh) {
  const std::string model_name = checked_model_name(plan, module);
  ResolvedPlan out;
  place_parameters(plan, module, mesh, model_name, out);
  warn_small_shards(plan.source, mesh, out);
  resolve_hooks(plan, module, mesh, model_name, out);
  return out;
}

namespace {

using NamedParameter = std::pair<std::string, ParameterPtr>;

/// This rank's parameters, each once with its placement: all, or those the caller's predicate
/// picks by any of their names.
std::vector<std::pair<NamedParameter, const ParamPlacement*>> pick_parameters(
    Module& module, const ResolvedPlan& plan, const ParallelizeOptions& options) {
  std::map<const Parameter*, bool> picked;
  for (const auto& [fqn, param] : module.all_parameter_names()) {
    picked[param.get()] = picked[param.get()] || !options.materialize || options.materialize(fqn);
  }
  std::vector<std::pair<NamedParameter, const ParamPlacement*>> out;
  size_t index = 0;
  for (auto& named : module.named_parameters()) {
    const ParamPlacement& placement = plan.parameters[index++];
    if (picked.at(named.second.get())) out.emplace_back(named, &placement);
  }
  return out;
}

/// Bytes of the parameters made, and the most held at once while making them.
struct InitBytes {
  int64_t bytes = 0, peak = 0;
};

/// Deferred init: each rank makes only its shard of each parameter, from the layout-free
/// generator (a parameter already made is redistributed).
InitBytes materialize(const std::vector<std::pair<NamedParameter, const ParamPlacement*>>& params,
                      const DeviceMesh& mesh, const ParallelizeOptions& options) {
  InitBytes out;
  for (const auto& [named, placement] : params) {
    const auto& [fqn, param] = named;
    DTensorSpec spec(mesh, placement->placements, param->shape);
    if (param->materialized()) {
      at::Tensor full = param->get().full_tensor().detach();
      param->value = distribute_tensor(full, mesh, placement->placements);
      param->value = DTensor(param->get().to_local().clone(), param->get().spec());
    } else {
      const int64_t local_bytes =
          c10::multiply_integers(spec.local_shape()) * c10::elementSize(options.dtype);
      // Normal init is computed in float64 before the cast: that buffer is the transient peak.
      const int64_t scratch = param->init.kind == ParamInit::Kind::kNormal
                                  ? c10::multiply_integers(spec.local_shape()) * int64_t{8}
                                  : 0;
      out.peak = std::max(out.peak, out.bytes + local_bytes + scratch);
      param->value =
          DTensor(param->init.make({options.seed, stream_id(fqn)}, spec, options.dtype), spec);
    }
    param->get().requires_grad_(param->trainable);
    out.bytes += static_cast<int64_t>(param->get().to_local().nbytes());
  }
  out.peak = std::max(out.peak, out.bytes);
  return out;
}

/// Forward resharding on module inputs and outputs, as the plan's hooks say.
void install_forward_hooks(Module& module, const ResolvedPlan& plan) {
  std::map<std::string, Module*> modules;
  for (auto& [fqn, m] : module.named_modules())
    modules[fqn] = m;
  for (const auto& hook : plan.hooks) {
    Module* target = modules.at(hook.module);
    const auto placements = hook.placements;
    const bool input = hook.input;
    HookFn fn = [placements, input](const Tensors& tensors) {
      Tensors out = tensors;
      for (size_t i = 0; i < out.size() && i < placements.size(); ++i) {
        const bool any_replicate = std::any_of(placements[i].begin(), placements[i].end(),
                                               [](const Placement& p) { return p.is_replicate(); });
        if (input && any_replicate) {
          out[i] = redistribute_for_consumers(out[i], placements[i]);
        } else if (out[i].placements() != placements[i]) {
          out[i] = out[i].redistribute(placements[i]);
        }
      }
      return out;
    };
    if (input) {
      target->set_input_hook(fn);
    } else {
      target->set_output_hook(fn);
    }
  }
}

}  // namespace

std::unique_ptr<ParallelizedModule> parallelize_module(std::shared_ptr<Module> module,
                                                       const DeviceMesh& mesh, const Plan& plan,
                                                       const ParallelizeOptions& options) {
  std::unique_ptr<ParallelizedModule> pm(new ParallelizedModule(module, mesh));
  pm->options_ = options;
  pm->plan_ = resolve_plan(plan, *module, mesh);
  if (mesh.world_rank() == mesh.rank_at(std::vector<int64_t>(mesh.ndim(), 0))) {
    for (const auto& w : pm->plan_.warnings)
      spdlog::warn("{}", w);
  }
  const auto mine = pick_parameters(*module, pm->plan_, options);
  for (const auto& [named, placement] : mine)
    pm->params_.push_back(named);
  const InitBytes init = materialize(mine, mesh, options);
  pm->param_bytes_ = init.bytes;
  pm->init_peak_bytes_ = init.peak;
  install_forward_hooks(*module, pm->plan_);
  apply_patches(*module, options.patches);
  return pm;
}

void ParallelizedModule::zero_grad() {
  for (auto& [fqn, param] : params_)
    param->get().zero_grad();
}

std::string describe_plan(const ResolvedPlan& plan, const DeviceMesh& mesh, at::ScalarType dtype) {
  std::string out = fmt::format("{:<44} {:<12} {:<10} {:<12} {:>9}  {}\n", "parameter", "global",
                                "placements", "local", "bytes", "plan key");
  int64_t total = 0;
  for (const auto& p : plan.parameters) {
    const DTensorSpec spec(mesh, p.placements, p.shape);
    const auto local = spec.local_shape();
    const int64_t bytes =
        c10::multiply_integers(local) * static_cast<int64_t>(c10::elementSize(dtype));
    total += bytes;
    out += fmt::format("{:<44} {:<12} {:<10} {:<12} {:>9}  {}\n", p.fqn, shape_str(p.shape),
                       placements_str(p.placements), shape_str(local),
                       format_bytes(static_cast<double>(bytes)),
                       p.key.empty() ? "(default R)" : p.key);
  }
  out += fmt::format("{} parameters, {} on rank {} of {}\n", plan.parameters.size(),
                     format_bytes(static_cast<double>(total)), mesh.world_rank(), mesh.str());
  for (const auto& h : plan.hooks) {
    std::vector<std::string> lists;
    for (const auto& p : h.placements)
      lists.push_back(placements_str(p));
    out += fmt::format("hook {}.{} -> {}  ({})\n", h.module.empty() ? "(root)" : h.module,
                       h.input ? "input" : "output", fmt::join(lists, ", "), h.key);
  }
  return out;
}

std::string ParallelizedModule::dump() const {
  return fmt::format("{} ({})\n{}", module_->type(), c10::toString(options_.dtype),
                     describe_plan(plan_, mesh_, options_.dtype));
}

}  // namespace vescale
