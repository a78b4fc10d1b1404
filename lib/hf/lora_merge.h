// A LoRA checkpoint's adapters on their base (NOTE [LoRA]): which Linears carry one, and the
// base's weights with the adapters merged in, W + alpha / rank · B A, parameter by parameter.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_reader.h"
#include "config/job_config.h"

namespace vescale::hf {

/// Our full parameter `fqn`, read alone: memory stays bounded by one tensor's sources.
using ParamReader = std::function<at::Tensor(const std::string& fqn)>;

/// The Linears (module FQNs, in the model's order) that `config`'s [lora] adapts, with their
/// weights' shapes [out, in].
std::vector<std::pair<std::string, std::vector<int64_t>>> adapted_linears(const JobConfig& config);

class LoraMerge {
 public:
  /// The base `adapters` (a LoRA checkpoint of a run of `config`) records, checked against its
  /// checksum, and the adapters. Throws UserError naming what is missing or changed.
  LoraMerge(const CheckpointReader& adapters, const JobConfig& config);
  LoraMerge(const LoraMerge&) = delete;  // reader() and the base's reader capture `this`
  LoraMerge& operator=(const LoraMerge&) = delete;
  /// The adapters' dtype as stored: the merged weights are computed in it.
  at::ScalarType dtype() const { return dtype_; }
  /// The merged parameters: the base's, plus alpha / rank · B A where an adapter is.
  ParamReader reader() const;

 private:
  const CheckpointReader& adapters_;
  JobConfig config_;
  std::map<std::string, std::vector<int64_t>> shapes_;  ///< every parameter's, by FQN
  std::map<std::string, std::string> adapter_of_;       ///< a weight's FQN -> its module
  ParamReader base_;
  at::ScalarType dtype_;
};

}  // namespace vescale::hf
