#include "train/model_factory.h"

#include <c10/util/accumulate.h>

#include <algorithm>

#include "core/error.h"
#include "dmodule/parallelize.h"
#include "models/gpt.h"
#include "models/mlp.h"

namespace vescale {

std::shared_ptr<Module> build_model(const JobConfig& c) {
  if (c.model == "mlp")
    return std::make_shared<models::MLP>(
        models::MLPConfig{c.d_in, c.d_hidden, c.d_out, c.n_layers});
  models::GPTConfig g;
  g.vocab_size = c.vocab_size;
  g.block_size = c.block_size;
  g.n_layer = c.n_layer;
  g.n_head = c.n_head;
  g.n_embd = c.n_embd;
  g.dropout = c.dropout;
  g.vocab_multiple = c.vocab_multiple;
  auto gpt = std::make_shared<models::GPT>(g, c.tp);
  gpt->dropout_state().seed = static_cast<uint64_t>(c.seed);
  return gpt;
}

bool under_modules(const std::string& fqn, const std::vector<std::string>& modules) {
  return std::any_of(modules.begin(), modules.end(),
                     [&](const std::string& m) { return fqn.rfind(m + ".", 0) == 0; });
}

int64_t parameters_under(Module& model, const std::vector<std::string>& modules) {
  int64_t total = 0;
  for (const auto& [fqn, param] : model.named_parameters())
    if (under_modules(fqn, modules)) total += c10::multiply_integers(param->shape);
  return total;
}

at::ScalarType job_dtype(const JobConfig& c) {
  if (c.dtype == "bfloat16") return at::kBFloat16;
  return c.dtype == "float64" ? at::kDouble : at::kFloat;
}

at::ScalarType state_dtype(const JobConfig& c) {
  return c.dtype == "bfloat16" ? at::kFloat : job_dtype(c);
}

namespace {

/// Forward rules place module inputs and outputs, whose dims the model fixes: GPT's are
/// [batch, seq, hidden] at most, the MLP's [batch, features]. A shard dim past them is a typo
/// found now, not by the first forward.
void check_forward_dims(const Plan& plan, const std::string& model) {
  const int64_t dims = model == "mlp" ? 2 : 3;
  for (const auto& rule : plan.forward) {
    for (const auto& per_tensor : rule.placements) {
      for (const auto& p : per_tensor) {
        VS_USER_CHECK(!p.is_shard() || (p.dim >= -dims && p.dim < dims),
                      "plan {}: forward key '{}': {} shards dim {}, but the {} model's module "
                      "inputs and outputs have at most {} dims (use -{} to {})",
                      plan_location(plan.source, rule.line), rule.key, p.str(), p.dim, model, dims,
                      dims, dims - 1);
      }
    }
  }
}

}  // namespace

Plan job_plan(const JobConfig& c) {
  if (c.plan.empty()) return replicate_plan(c.model);
  Plan plan = Plan::load(c.plan);
  check_forward_dims(plan, c.model);
  return plan;
}

}  // namespace vescale
