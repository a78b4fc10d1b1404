// The rules a job config's values must keep beyond their types and ranges: the words a string key
// takes, and the rules across keys (the mesh, the batch, the family's own, the backend).
#pragma once

#include "config/job_config.h"

namespace vescale {

/// Throws UserError naming the key and what would be valid when a string key's word is not one
/// it takes.
void check_values(const JobConfig& c);
/// optimizer.adamw_params: roles of param_role_names() but "hidden", each once, norm and bias
/// among them (NOTE [Muon]).
void check_adamw_params(const JobConfig& c);
/// [lora] with rank > 0: targets that are roles of the family (each once), blocks of the model,
/// and a base to start from (NOTE [LoRA]).
void check_lora(const JobConfig& c);
/// Throws UserError naming the keys when they do not fit together.
void check_combinations(const JobConfig& c);

}  // namespace vescale
