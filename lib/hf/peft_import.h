// A peft adapter folder as the initial adapters of a LoRA job (NOTE [PEFT adapters]):
// adapter_config.json checked against the job's [lora], adapter_model.safetensors mapped to our
// adapter parameters.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <string>

#include "config/job_config.h"
#include "hf/safetensors.h"

namespace vescale::hf {

class PeftAdapter {
 public:
  /// Opens `folder` for the adapters of `config`. Throws UserError naming the file and what
  /// differs: not a LoRA adapter, a DoRA or rsLoRA one, another scale alpha / r than this job's,
  /// a rank this job's lora.rank cannot hold, a module adapted on one side only.
  PeftAdapter(const std::string& folder, const JobConfig& config);

  /// Our adapter factor `fqn` ("<linear>.lora_A.weight" or ".lora_B.weight"), whole.
  at::Tensor read(const std::string& fqn) const;

 private:
  struct Place {
    std::string module;  ///< its factors' prefix in the file (PeftModule::key)
    int64_t row_offset = 0;
    int64_t out = 0;              ///< our Linear's output rows
    int64_t part = 0, parts = 1;  ///< our Linear's index among its expert's (or module's)
    int64_t expert = 0, experts = 1;
  };
  std::string folder_;
  int64_t rank_ = 0;
  std::unique_ptr<SafetensorsFile> file_;
  std::map<std::string, Place> places_;   ///< our Linears
  std::map<std::string, int64_t> ranks_;  ///< the file's rank of each module (an expert's)
};

}  // namespace vescale::hf
