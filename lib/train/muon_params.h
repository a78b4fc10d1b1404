// Which parameters Muon updates (NOTE [Muon]) and what its Newton-Schulz costs a step, from the
// job config alone: what the optimizer, MFU, plan lint and plan auto read.
#pragma once

#include <cstddef>
#include <string>

#include "config/job_config.h"

namespace vescale {

/// Whether Muon updates parameter `fqn` of `dims` dims under `c`: a matrix none of whose roles
/// (ModelFamily::param_roles) optimizer.adamw_params names. False unless optimizer.name = "muon".
bool takes_muon(const JobConfig& c, const std::string& fqn, size_t dims);

/// Newton-Schulz FLOPs a step over the whole model: each matrix Muon updates once, at its
/// global shape (NOTE [Muon exchange]); 0 for other optimizers. Builds the model declared, not
/// allocated.
double muon_flops_per_step(const JobConfig& c);

}  // namespace vescale
