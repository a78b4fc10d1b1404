#include "dtensor/recompute.h"

#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/grad_mode.h>

#include "core/autograd_node.h"
#include "core/error.h"

namespace vescale {
namespace {

using torch::autograd::variable_list;

thread_local bool recompute_attention = false;

/// The node of NOTE [Recompute]: edge i is input i; gradient j comes for differentiable output j.
class RecomputeNode : public torch::autograd::Node {
 public:
  RecomputeNode(LocalFunction forward, std::vector<at::Tensor> inputs,
                std::vector<size_t> differentiable_outputs, std::string name)
      : forward_(std::move(forward)),
        inputs_(std::move(inputs)),
        outputs_(std::move(differentiable_outputs)),
        name_(std::move(name)) {}

  variable_list apply(variable_list&& grads) override {
    VS_CHECK(forward_, "[recompute] {}: backward a second time without retain_graph", name_);
    variable_list result(inputs_.size());
    std::vector<at::Tensor> aliases;
    std::vector<size_t> wanted;
    for (size_t i = 0; i < inputs_.size(); ++i) {
      at::Tensor alias = inputs_[i].detach();
      if (task_should_compute_output(i)) {
        alias.requires_grad_(true);
        wanted.push_back(i);
      }
      aliases.push_back(std::move(alias));
    }
    if (wanted.empty()) return result;
    std::vector<at::Tensor> outputs;
    {
      torch::autograd::AutoGradMode grad_on(true);
      outputs = forward_(aliases);
    }
    std::vector<at::Tensor> roots, root_grads;
    for (size_t j = 0; j < outputs_.size(); ++j) {
      const at::Tensor& out = outputs.at(outputs_[j]);
      if (grads[j].defined() && out.requires_grad()) {
        roots.push_back(out);
        root_grads.push_back(grads[j]);
      }
    }
    if (roots.empty()) return result;
    std::vector<at::Tensor> targets;
    for (size_t i : wanted)
      targets.push_back(aliases[i]);
    const variable_list found =
        torch::autograd::grad(roots, targets, root_grads,
                              /*retain_graph=*/false,
                              /*create_graph=*/false, /*allow_unused=*/true);
    for (size_t n = 0; n < wanted.size(); ++n)
      result[wanted[n]] = found[n];
    return result;
  }

  std::string name() const override { return name_; }

  // The inputs and the closure (it may hold modules' tensors) go once backward has run.
  void release_variables() override {
    inputs_.clear();
    forward_ = nullptr;
  }

 private:
  LocalFunction forward_;
  std::vector<at::Tensor> inputs_;
  std::vector<size_t> outputs_;  ///< the differentiable outputs' indices, in gradient order
  std::string name_;
};

}  // namespace

std::vector<at::Tensor> recompute_in_backward(LocalFunction forward, std::vector<at::Tensor> inputs,
                                              const std::string& name) {
  bool any_grad = false;
  for (const at::Tensor& x : inputs)
    any_grad = any_grad || (x.defined() && x.requires_grad());
  if (!torch::autograd::GradMode::is_enabled() || !any_grad) return forward(inputs);
  std::vector<at::Tensor> outputs;
  {
    torch::autograd::AutoGradMode no_grad(false);
    outputs = forward(inputs);
  }
  std::vector<size_t> differentiable;
  for (size_t j = 0; j < outputs.size(); ++j) {
    at::Tensor& out = outputs[j];
    if (!out.defined() || !torch::autograd::isDifferentiableType(out.scalar_type())) continue;
    // An input passed through: its own history is not this node's to overwrite.
    for (const at::Tensor& x : inputs) {
      if (out.is_same(x)) {
        torch::autograd::AutoGradMode no_grad(false);
        out = out.clone();
      }
    }
    differentiable.push_back(j);
  }
  torch::autograd::edge_list edges = torch::autograd::collect_next_edges(inputs);
  auto node = make_node<RecomputeNode>(std::move(forward), std::move(inputs), differentiable, name);
  node->set_next_edges(std::move(edges));
  for (size_t j : differentiable)
    torch::autograd::set_history(outputs[j], node);
  return outputs;
}

RecomputeAttentionScope::RecomputeAttentionScope() : previous_(recompute_attention) {
  recompute_attention = true;
}

RecomputeAttentionScope::~RecomputeAttentionScope() {
  recompute_attention = previous_;
}

bool RecomputeAttentionScope::active() {
  return recompute_attention;
}

}  // namespace vescale
