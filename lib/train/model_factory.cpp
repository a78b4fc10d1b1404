#include "train/model_factory.h"

#include "config/dtype_policy.h"
#include "core/error.h"
#include "dmodule/parallelize.h"

namespace vescale {

std::shared_ptr<Module> build_model(const JobConfig& c) {
  return c.family().build(c.model_spec());
}

at::ScalarType job_dtype(const JobConfig& c) {
  return dtype_policy(c).compute;
}

at::ScalarType state_dtype(const JobConfig& c) {
  return dtype_policy(c).state;
}

namespace {

/// Forward rules place module inputs and outputs, whose dims the family fixes (GPT's are
/// [batch, seq, hidden] at most, the MLP's [batch, features]). A shard dim past them is a typo
/// found now, not by the first forward.
void check_forward_dims(const Plan& plan, const std::string& model) {
  const int64_t dims = model_family(model).activation_dims();
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
