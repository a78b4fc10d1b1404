// The model a job config describes (parameters declared, nothing allocated: deferred init).
#pragma once

#include <ATen/core/ScalarType.h>

#include <memory>
#include <string>
#include <vector>

#include "config/job_config.h"
#include "dmodule/module.h"
#include "dmodule/plan.h"

namespace vescale {

/// The model of the [model] section's family (a vocabulary is padded for parallel.tp).
std::shared_ptr<Module> build_model(const JobConfig& config);
/// dtype_policy(config).compute: the scalar type the model computes in (bfloat16: bf16).
at::ScalarType job_dtype(const JobConfig& config);
/// dtype_policy(config).state: parameters as initialised and saved, master weights, optimizer
/// state and gradient reductions (bfloat16 runs: float32).
at::ScalarType state_dtype(const JobConfig& config);
/// parallel.plan, or a replicate-everything plan when it is empty.
Plan job_plan(const JobConfig& config);

}  // namespace vescale
