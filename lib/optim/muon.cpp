#include "optim/muon.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "core/error.h"
#include "optim/flat_layout.h"

namespace vescale {
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

std::vector<DTensorSpec> matrix_specs(const std::vector<ParamView>& views,
                                      const std::vector<size_t>& matrices) {
  std::vector<DTensorSpec> out;
  for (size_t k : matrices)
    out.push_back(views.at(k).spec);
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
      adamw_(unmarked(views_, matrix), adamw),
      exchange_(matrix_specs(views_, matrices_), options.ns_steps) {
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

void Muon::step(double lr) {
  torch::autograd::AutoGradMode no_grad(false);
  adamw_.set_steps(steps_);
  adamw_.step(lr);
  ++steps_;
  const double mu = options_.momentum;
  std::vector<at::Tensor> updates;
  for (size_t j = 0; j < matrices_.size(); ++j) {
    const ParamView& v = views_[matrices_[j]];
    at::Tensor g = v.grad();
    // Every rank of a matrix joins its exchange: a piece without a gradient counts zeros.
    if (!g.defined()) g = at::zeros_like(v.value());
    at::Tensor& m = momentum(j);
    m.lerp_(g, 1.0 - mu);
    updates.push_back(options_.nesterov ? g.lerp(m, mu) : m);
  }
  const std::vector<at::Tensor> orthogonal =
      exchange_.run(updates, [this](const at::Tensor& whole) {
        return newton_schulz(whole, options_.ns_steps, options_.eps);
      });
  for (size_t j = 0; j < matrices_.size(); ++j) {
    const ParamView& v = views_[matrices_[j]];
    const at::Tensor p = v.value();
    if (v.weight_decay && options_.weight_decay != 0) p.mul_(1.0 - lr * options_.weight_decay);
    p.add_(orthogonal[j],
           -lr * muon_scale(v.spec.shape[0], v.spec.shape[1], options_.match_adamw_rms));
  }
}

std::vector<OptimizerStateTensor> Muon::state_tensors() {
  std::vector<OptimizerStateTensor> out = adamw_.state_tensors();
  for (size_t j = 0; j < matrices_.size(); ++j) {
    const ParamView& v = views_[matrices_[j]];
    out.push_back({v.name, kMomentum, momentum(j).view(v.spec.local_shape()), v.spec});
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
