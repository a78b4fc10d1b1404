#include "config/dtype_policy.h"

#include "config/job_config.h"

namespace vescale {

DTypePolicy dtype_policy(const JobConfig& config) {
  DTypePolicy p;
  p.compute = config.dtype;
  p.state = p.compute == c10::kBFloat16 ? c10::kFloat : p.compute;
  p.reduce = p.state;
  return p;
}

}  // namespace vescale
