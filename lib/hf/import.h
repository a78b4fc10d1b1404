// A Hugging Face model folder as the weights a job starts from ("hf:DIR" wherever a checkpoint
// path goes: checkpoint.load, eval --checkpoint): config.json checked against the job's model,
// the safetensors files (one, or several with their index) mapped to our parameters by the
// family's layout (NOTE [Hugging Face layout]), each read when it is asked for.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "config/job_config.h"
#include "family/hf_layout.h"
#include "hf/safetensors.h"

namespace vescale::hf {

/// Whether `path` names a Hugging Face folder: "hf:DIR".
bool is_hf_path(const std::string& path);
/// The folder "hf:DIR" names (DIR); `path` itself when it has no "hf:".
std::string hf_folder(const std::string& path);

class HFWeights {
 public:
  /// Opens "hf:DIR" for the model of `config`. Throws UserError naming the folder and, for a
  /// config.json that is not this model's, the key and both values.
  HFWeights(const std::string& path, const JobConfig& config);

  const std::string& folder() const { return folder_; }
  /// Box [offsets, offsets + sizes) of our parameter `fqn` of global shape `shape`.
  at::Tensor read_box(const std::string& fqn, const std::vector<int64_t>& shape,
                      const std::vector<int64_t>& offsets, const std::vector<int64_t>& sizes);

 private:
  /// Hugging Face tensor `k` as stored, refused if not finite.
  at::Tensor read_tensor(size_t k);

  std::string folder_;
  HFLayout layout_;
  std::map<std::string, std::shared_ptr<SafetensorsFile>> file_of_;  ///< by Hugging Face name
  std::map<std::string, std::pair<size_t, size_t>> sources_;  ///< ours -> (tensor, source index)
  /// The last Hugging Face tensor converted, as our parameters (q, k and v come from one).
  size_t cached_ = SIZE_MAX;
  std::vector<at::Tensor> cache_;
};

}  // namespace vescale::hf
