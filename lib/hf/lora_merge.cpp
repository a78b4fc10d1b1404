#include "hf/lora_merge.h"

#include <ATen/ATen.h>

#include "core/error.h"
#include "hf/import.h"
#include "hf/lora_base.h"

namespace vescale::hf {

std::vector<std::pair<std::string, std::vector<int64_t>>> adapted_linears(const JobConfig& config) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  const std::string suffix = ".lora_A.weight";
  for (const auto& [fqn, p] : config.family().build(config.model_spec())->named_parameters()) {
    if (!p->adapter || p->adapter->factor != AdapterOf::Factor::kA) continue;
    out.emplace_back(fqn.substr(0, fqn.size() - suffix.size()), p->adapter->base->shape);
  }
  return out;
}

LoraMerge::LoraMerge(const CheckpointReader& adapters, const JobConfig& config)
    : adapters_(adapters), config_(config) {
  const CheckpointMeta& meta = adapters.meta();
  VS_USER_CHECK(!meta.lora_base.empty(),
                "[export] {}: its run trained LoRA adapters but the checkpoint names no base",
                adapters.path());
  check_lora_base({meta.lora_base, meta.lora_base_checksum}, adapters.path());
  for (const auto& [fqn, p] : config.family().build(config.model_spec())->named_parameters())
    shapes_[fqn] = p->shape;
  for (const auto& [module, shape] : adapted_linears(config))
    adapter_of_[module + ".weight"] = module;
  VS_USER_CHECK(!adapter_of_.empty(), "[export] {}: no adapters in its run's model",
                adapters.path());
  dtype_ = adapters.dtype("model/" + adapter_of_.begin()->second + ".lora_A.weight");
  if (is_hf_path(meta.lora_base)) {
    auto weights = std::make_shared<HFWeights>(meta.lora_base, config_);
    base_ = [weights, this](const std::string& fqn) {
      const std::vector<int64_t>& shape = shapes_.at(fqn);
      return weights->read_box(fqn, shape, std::vector<int64_t>(shape.size(), 0), shape);
    };
  } else {
    auto base = std::make_shared<CheckpointReader>(meta.lora_base);
    base_ = [base](const std::string& fqn) {
      VS_USER_CHECK(base->has("model/" + fqn), "[export] the base {}: no tensor model/{}",
                    base->path(), fqn);
      return base->read_full("model/" + fqn);
    };
  }
}

ParamReader LoraMerge::reader() const {
  return [this](const std::string& fqn) {
    at::Tensor w = base_(fqn).to(dtype_);
    const auto adapted = adapter_of_.find(fqn);
    if (adapted == adapter_of_.end()) return w;
    const std::string& module = adapted->second;
    const at::Tensor a = adapters_.read_full("model/" + module + ".lora_A.weight");
    const at::Tensor b = adapters_.read_full("model/" + module + ".lora_B.weight");
    return w + config_.lora().scaling() * at::matmul(b, a);
  };
}

}  // namespace vescale::hf
