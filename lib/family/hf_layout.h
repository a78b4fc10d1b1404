// How a family's parameters and config map to a Hugging Face model's (NOTE [Hugging Face
// layout]): each Hugging Face tensor is made from some of our parameters (export) and gives them
// back (import), and config.json is made from the family's keys.
//
// NOTE [Hugging Face layout]
// Export and import go tensor by tensor, so memory stays bounded by the largest tensor (and the
// few a fused one is made of). Each family says, per Hugging Face tensor, which of our full
// parameters it is made of and how: GPT-2's c_attn is q, k and v concatenated, and every GPT-2
// Linear is a Conv1D there, stored [in, out]; padded vocabulary rows are dropped on export and
// come back as zeros on import (their logits are masked, their embeddings never looked up); a
// tied head is not stored. Llama's names are ours, and our rotary embedding is Hugging Face's
// rotate-half convention, so q_proj and k_proj need no permutation. Mixtral's experts are each
// their own parameters under Hugging Face's names (experts.{j}.w1.weight), so they too are the
// same tensor on both sides.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace vescale {

struct HFTensor {
  std::string name;                  ///< Hugging Face's: "transformer.h.0.attn.c_attn.weight"
  std::vector<int64_t> shape;        ///< Hugging Face's
  std::vector<std::string> sources;  ///< our parameter FQNs it is made of
  /// Our full parameters (in `sources`' order) -> Hugging Face's tensor.
  std::function<at::Tensor(const std::vector<at::Tensor>&)> to_hf;
  /// Hugging Face's tensor -> our parameters, each of the shape asked for (`shapes`, in
  /// `sources`' order: a padded vocabulary has more rows than Hugging Face's).
  std::function<std::vector<at::Tensor>(const at::Tensor&,
                                        const std::vector<std::vector<int64_t>>& shapes)>
      from_hf;
};

/// Where one of our Linears lies inside a Hugging Face module (NOTE [PEFT adapters]): GPT-2's
/// q_proj is rows [0, C) of c_attn's 3C outputs.
struct HFLinear {
  std::string module;      ///< Hugging Face's: "transformer.h.0.attn.c_attn"
  int64_t row_offset = 0;  ///< where our output rows start among its outputs
  int64_t rows = 0;        ///< its outputs
  /// A parameter stacking `experts` experts' projections (transformers' Mixtral
  /// "model.layers.0.mlp.experts.gate_up_proj" [E, 2I, C], which `module` names), of which our
  /// Linear is expert `expert`'s; experts = 0: a module of its own.
  int64_t expert = 0, experts = 0;
};

struct HFLayout {
  std::string architecture;       ///< "GPT2LMHeadModel"
  nlohmann::ordered_json config;  ///< config.json, but torch_dtype (the export sets it)
  std::vector<HFTensor> tensors;  ///< in the order they are written
  /// The config.json keys an import checks against the job's: Hugging Face's key and ours
  /// ("model.n_layer"); config's value is what ours must equal.
  std::vector<std::pair<std::string, std::string>> checked_keys;
  /// Values a checked key may also have that mean the same model (GPT-2's n_inner: null or
  /// 4 x n_embd).
  std::map<std::string, nlohmann::json> also_accepted = {};
  /// What Hugging Face's config class takes for a checked key config.json leaves out
  /// (MixtralConfig's num_local_experts: 8): an import compares that value, as transformers
  /// would build the model with it.
  std::map<std::string, nlohmann::json> hf_defaults = {};
  /// Name endings of tensors a Hugging Face file may hold that this model keeps elsewhere or
  /// recomputes (GPT-2's attention-mask buffers, a tied lm_head.weight): an import reads past
  /// them, and refuses any other tensor it does not know.
  std::vector<std::string> ignored_suffixes = {};
  /// Our Linears (module FQNs) that are part of another Hugging Face module; any other Linear
  /// is the module of its own name. A LoRA adapter's place in peft's files.
  std::map<std::string, HFLinear> linears = {};
  /// Whether Hugging Face's Linears are Conv1D ([in, out] weights, GPT-2): peft's fan_in_fan_out.
  bool conv1d = false;
  /// The stacked parameters of a module in the order it registers them ({"gate_up_proj",
  /// "down_proj"}): peft wraps them in that order, the first innermost (NOTE [PEFT adapters]).
  std::vector<std::string> stacked_order = {};
};

/// A tensor stored under the same name and shape on both sides.
HFTensor same_tensor(const std::string& name, std::vector<int64_t> shape);
/// A Linear weight ours as [out, in], Hugging Face's as a Conv1D's [in, out] (GPT-2).
HFTensor transposed(const std::string& name, int64_t in, int64_t out);
/// Tensors concatenated along dim 0 of ours (q, k, v into GPT-2's c_attn), then transposed when
/// `conv1d` (weights) or not (biases); `rows` is each source's dim-0 size.
HFTensor concatenated(const std::string& name, std::vector<std::string> sources, int64_t rows,
                      std::vector<int64_t> trailing, bool conv1d);
/// An embedding or head whose `vocab` rows Hugging Face keeps of our padded ones.
HFTensor vocab_rows(const std::string& hf_name, const std::string& ours, int64_t vocab,
                    int64_t width);

}  // namespace vescale
