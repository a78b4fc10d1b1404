#include "optim/muon.h"

#include <ATen/ATen.h>
#include <c10/util/accumulate.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "core/error.h"
#include "optim/adjacent_runs.h"

namespace vescale {
namespace {

/// `full`'s region `box`.
at::Tensor box_of(const at::Tensor& full, const Box& box) {
  at::Tensor out = full;
  for (size_t d = 0; d < box.sizes.size(); ++d)
    out = out.narrow(static_cast<int64_t>(d), box.offsets[d], box.sizes[d]);
  return out;
}

/// `full`'s box of view `spec` (its local piece).
at::Tensor box_of(const at::Tensor& full, const DTensorSpec& spec) {
  return box_of(full, Box::local(spec));
}

}  // namespace

at::Tensor newton_schulz(const at::Tensor& u, int64_t steps, double eps) {
  VS_CHECK(u.dim() == 2, "[optim] newton_schulz: a matrix, not {} dims", u.dim());
  constexpr double a = 3.4445, b = -4.7750, c = 2.0315;
  const bool tall = u.size(0) > u.size(1);
  at::Tensor x = tall ? u.t() : u;
  x = x / x.norm().clamp_min(eps);
  for (int64_t i = 0; i < steps; ++i) {
    const at::Tensor gram = at::matmul(x, x.t());
    const at::Tensor poly = at::addmm(gram, gram, gram, b, c);
    x = at::addmm(x, poly, x, a);
  }
  return tall ? x.t() : x;
}

double muon_scale(int64_t rows, int64_t cols, bool match_adamw_rms) {
  const auto r = static_cast<double>(rows), c = static_cast<double>(cols);
  return match_adamw_rms ? 0.2 * std::sqrt(std::max(r, c)) : std::sqrt(std::max(1.0, r / c));
}

namespace {

std::vector<size_t> marked(const std::vector<bool>& matrix) {
  std::vector<size_t> out;
  for (size_t k = 0; k < matrix.size(); ++k)
    if (matrix[k]) out.push_back(k);
  return out;
}

std::vector<ParamView> unmarked(const std::vector<ParamView>& views,
                                const std::vector<bool>& matrix) {
  std::vector<ParamView> out;
  for (size_t k = 0; k < views.size(); ++k)
    if (!matrix[k]) out.push_back(views[k]);
  return out;
}

}  // namespace

Muon::Muon(std::vector<ParamView> views, const std::vector<bool>& matrix, MuonOptions options,
           AdamWOptions adamw)
    : Optimizer(std::move(views)),
      options_(options),
      matrices_(marked(matrix)),
      adamw_(unmarked(views_, matrix), adamw) {
  VS_CHECK(matrix.size() == views_.size(), "[optim] Muon: {} marks for {} views", matrix.size(),
           views_.size());
  for (size_t k : matrices_)
    VS_CHECK(views_[k].spec.shape.size() == 2, "[optim] Muon: {} is {}-D; Muon updates matrices",
             views_[k].name, views_[k].spec.shape.size());
}

at::Tensor& Muon::momentum(size_t j) {
  if (momentum_.empty()) {
    std::vector<ParamView> matrices;
    for (size_t k : matrices_)
      matrices.push_back(views_[k]);
    momentum_ = flat_zeros(matrices);
  }
  return momentum_[j];
}

at::Tensor Muon::whole(size_t k, const at::Tensor& piece) const {
  const DTensorSpec& spec = views_[k].spec;
  const std::vector<int> split = spec.split_dims();
  if (split.empty()) return piece.view(spec.shape);
  at::Tensor full = at::zeros(spec.shape, piece.options());
  box_of(full, spec).copy_(piece.view(spec.local_shape()));
  for (int d : split)
    spec.mesh.group(d).all_reduce(full, comm::ReduceOp::kSum);
  return full;
}

at::Tensor Muon::orthogonal_piece(size_t j, const at::Tensor& u) const {
  const DTensorSpec& spec = views_[matrices_[j]].spec;
  const std::vector<int> split = spec.split_dims();
  if (split.size() != 1) {
    const at::Tensor o = newton_schulz(whole(matrices_[j], u), options_.ns_steps, options_.eps);
    return box_of(o, spec).reshape({-1});
  }
  // One dim splits it: the j-th matrix's owner is rank j mod n of that dim's group.
  const int d = split.front();
  const comm::Group& group = spec.mesh.group(d);
  const int n = group.size(), me = group.rank(), owner = static_cast<int>(j % n);
  std::vector<int64_t> coordinate = spec.mesh.coordinate();
  VS_CHECK(coordinate[d] == me, "[optim] Muon: {} is rank {} of its {} group at coordinate {}",
           views_[matrices_[j]].name, me, group.label(), coordinate[d]);
  std::vector<Box> boxes;
  for (int q = 0; q < n; ++q) {
    coordinate[d] = q;
    boxes.push_back(spec.local_box(coordinate));
  }
  const auto numel = [](const Box& b) { return c10::multiply_integers(b.sizes); };
  const at::Tensor none = u.new_empty({0});
  // 1. Every rank's piece to the owner.
  std::vector<at::Tensor> to_owner(n, none);
  to_owner[owner] = u.reshape({-1});
  std::vector<std::vector<int64_t>> sizes(n, {0});
  for (int q = 0; q < n && me == owner; ++q)
    sizes[q] = {numel(boxes[q])};
  const std::vector<at::Tensor> pieces = group.all_to_all(to_owner, sizes);
  // 2. The owner orthogonalizes the whole matrix and cuts it into the ranks' boxes.
  std::vector<at::Tensor> to_ranks(n, none);
  if (me == owner) {
    at::Tensor full = at::zeros(spec.shape, u.options());
    for (int q = 0; q < n; ++q)
      box_of(full, boxes[q]).copy_(pieces[q].view(boxes[q].sizes));
    const at::Tensor o = newton_schulz(full, options_.ns_steps, options_.eps);
    for (int q = 0; q < n; ++q)
      to_ranks[q] = box_of(o, boxes[q]).reshape({-1});
  }
  // 3. Each rank's box back.
  std::vector<std::vector<int64_t>> back(n, {0});
  back[owner] = {numel(boxes[me])};
  return group.all_to_all(to_ranks, back)[owner];
}

void Muon::step(double lr) {
  torch::autograd::AutoGradMode no_grad(false);
  adamw_.set_steps(steps_);
  adamw_.step(lr);
  ++steps_;
  const double mu = options_.momentum;
  for (size_t j = 0; j < matrices_.size(); ++j) {
    const size_t k = matrices_[j];
    const at::Tensor p = views_[k].value();
    at::Tensor g = views_[k].grad();
    // Every rank of the matrix joins its sums: a piece without a gradient counts zeros.
    if (!g.defined()) g = at::zeros_like(p);
    at::Tensor& m = momentum(j);
    m.lerp_(g, 1.0 - mu);
    const at::Tensor u = options_.nesterov ? g.lerp(m, mu) : m;
    const std::vector<int64_t>& shape = views_[k].spec.shape;
    const at::Tensor o = orthogonal_piece(j, u);
    if (views_[k].weight_decay && options_.weight_decay != 0)
      p.mul_(1.0 - lr * options_.weight_decay);
    p.add_(o, -lr * muon_scale(shape[0], shape[1], options_.match_adamw_rms));
  }
}

std::vector<OptimizerStateTensor> Muon::state_tensors() {
  std::vector<OptimizerStateTensor> out = adamw_.state_tensors();
  for (size_t j = 0; j < matrices_.size(); ++j) {
    const ParamView& v = views_[matrices_[j]];
    out.push_back({v.name, "muon_momentum", momentum(j).view(v.spec.local_shape()), v.spec});
  }
  return out;
}

int64_t Muon::state_bytes() const {
  int64_t bytes = adamw_.state_bytes();
  for (const at::Tensor& m : momentum_)
    bytes += static_cast<int64_t>(m.nbytes());
  return bytes;
}

}  // namespace vescale
