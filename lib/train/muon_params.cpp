#include "train/muon_params.h"

#include <algorithm>

#include "optim/muon_exchange.h"

namespace vescale {

bool takes_muon(const JobConfig& c, const std::string& fqn, size_t dims) {
  if (c.optimizer != OptimizerKind::kMuon || dims != 2) return false;
  for (const ParamRole role : c.family().param_roles(c.model_spec(), fqn)) {
    const std::string name = param_role_names().name(role);
    if (std::find(c.adamw_params.begin(), c.adamw_params.end(), name) != c.adamw_params.end())
      return false;
  }
  return true;
}

double muon_flops_per_step(const JobConfig& c) {
  if (c.optimizer != OptimizerKind::kMuon) return 0.0;
  double out = 0.0;
  for (const auto& [fqn, p] : c.family().build(c.model_spec())->named_parameters())
    if (p->trainable && takes_muon(c, fqn, p->shape.size()))
      out += newton_schulz_flops(p->shape[0], p->shape[1], c.ns_steps);
  return out;
}

}  // namespace vescale
