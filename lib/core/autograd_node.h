// NOTE [Autograd nodes]: our hand-made autograd nodes (dtensor/custom_backward.cpp,
// dtensor/recompute.cpp, dtensor/ring_attention.cpp, dtensor/linear_cross_entropy.cpp, the
// blocked attention in kernels/local_kernels.cpp) are owned as LibTorch owns its own: through a
// std::shared_ptr that frees them by torch::autograd::deleteNode (which unlinks a long graph
// without deep recursion) up to LibTorch 2.12, through a c10::intrusive_ptr from 2.13, where Node
// is an intrusive_ptr_target and deleteNode is gone (VESCALE_AUTOGRAD_NODES_ARE_INTRUSIVE, found
// by scripts/check-newest-torch.sh). make_node and self_of are the only places that differ.
#pragma once

#include <torch/csrc/autograd/function.h>

#include <memory>
#include <utility>

#include "core/version_guards.h"

namespace vescale {

#if VESCALE_AUTOGRAD_NODES_ARE_INTRUSIVE
template <typename N>
using NodePtr = c10::intrusive_ptr<N>;
#else
template <typename N>
using NodePtr = std::shared_ptr<N>;
#endif

/// A new node of type N (a torch::autograd::Node), owned as this LibTorch owns nodes.
template <typename N, typename... Args>
NodePtr<N> make_node(Args&&... args) {
#if VESCALE_AUTOGRAD_NODES_ARE_INTRUSIVE
  return c10::make_intrusive<N>(std::forward<Args>(args)...);
#else
  return NodePtr<N>(new N(std::forward<Args>(args)...), torch::autograd::deleteNode);
#endif
}

/// An owning pointer to `node` from inside it (SavedVariable::unpack takes the node that saved an
/// output of its own).
inline NodePtr<torch::autograd::Node> self_of(torch::autograd::Node& node) {
#if VESCALE_AUTOGRAD_NODES_ARE_INTRUSIVE
  return node.getptr();
#else
  return node.shared_from_this();
#endif
}

}  // namespace vescale
