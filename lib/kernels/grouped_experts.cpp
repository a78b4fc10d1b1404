#include "kernels/grouped_experts.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cstdint>

#include "core/error.h"
#include "kernels/cuda_kernels.h"
#include "kernels/kernel_table.h"

namespace vescale {
namespace {

/// `x` itself; its gradient times `scale`.
struct GradScale : public torch::autograd::Function<GradScale> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            double scale) {
    ctx->saved_data["scale"] = scale;
    return x;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    return {grads.at(0) * ctx->saved_data["scale"].toDouble(), at::Tensor()};
  }
};

/// `x` itself; its gradient times `scale` (x where there is nothing to scale).
at::Tensor scale_grad(const at::Tensor& x, double scale) {
  if (scale == 1.0 || !x.requires_grad() || !torch::autograd::GradMode::is_enabled()) return x;
  return GradScale::apply(x, scale);
}

/// x W^T, with its adapter's scaling (x A^T) B^T where it has one (Linear's order of operations,
/// so that an expert's term is a dense projection's to the bit); the weights' gradients times
/// `grad_scale`.
at::Tensor project(const at::Tensor& x, const at::Tensor& w, const ExpertAdapter& lora,
                   double grad_scale) {
  const at::Tensor y = at::matmul(x, scale_grad(w, grad_scale).t());
  if (!lora.on()) return y;
  const at::Tensor low = at::matmul(x, scale_grad(lora.a, grad_scale).t());
  return y + at::matmul(low, scale_grad(lora.b, grad_scale).t()) * lora.scaling;
}

/// The groups' ends on the host (the reference's one read), checked against the rows.
std::vector<int64_t> host_ends(const at::Tensor& ends, int64_t groups, int64_t rows) {
  const at::Tensor on_host = ends.to(at::kCPU, at::kLong).contiguous();
  VS_CHECK(on_host.dim() == 1 && on_host.size(0) == groups,
           "[kernels] grouped matmul: {} groups' ends for {} groups", on_host.numel(), groups);
  std::vector<int64_t> out(on_host.data_ptr<int64_t>(), on_host.data_ptr<int64_t>() + groups);
  int64_t start = 0;
  for (const int64_t end : out) {
    VS_CHECK(end >= start, "[kernels] grouped matmul: the groups' ends decrease ({} after {})", end,
             start);
    start = end;
  }
  VS_CHECK(start == rows, "[kernels] grouped matmul: groups of {} rows for {}", start, rows);
  return out;
}

at::Tensor reference_mm(const at::Tensor& x, const at::Tensor& ends,
                        const std::vector<at::Tensor>& w, bool transpose_w) {
  const std::vector<int64_t> e = host_ends(ends, static_cast<int64_t>(w.size()), x.size(0));
  std::vector<at::Tensor> pieces;
  int64_t start = 0;
  for (size_t g = 0; g < w.size(); ++g) {
    pieces.push_back(at::matmul(x.narrow(0, start, e[g] - start), transpose_w ? w[g].t() : w[g]));
    start = e[g];
  }
  return at::cat(pieces);
}

at::Tensor reference_weight_grads(const at::Tensor& dy, const at::Tensor& x,
                                  const at::Tensor& ends) {
  const std::vector<int64_t> e = host_ends(ends, ends.numel(), x.size(0));
  std::vector<at::Tensor> grads;
  int64_t start = 0;
  for (const int64_t end : e) {
    grads.push_back(
        at::matmul(dy.narrow(0, start, end - start).t(), x.narrow(0, start, end - start)));
    start = end;
  }
  return at::stack(grads);
}

/// y = group g's rows of x times w[g]^T, for every group, by `gemm`; its backward is the grouped
/// matmul by the weights (x's gradient) and the grouped weights' gradients, times `scale`.
struct GroupedLinear : public torch::autograd::Function<GroupedLinear> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& ends, at::TensorList w, const GroupedGemm* gemm,
                            double scale) {
    std::vector<at::Tensor> weights(w.begin(), w.end());
    std::vector<at::Tensor> saved{x};
    saved.insert(saved.end(), weights.begin(), weights.end());
    ctx->save_for_backward(saved);
    ctx->saved_data["ends"] = ends;
    ctx->saved_data["gemm"] = static_cast<int64_t>(reinterpret_cast<intptr_t>(gemm));
    ctx->saved_data["scale"] = scale;
    return gemm->mm(x, ends, weights, /*transpose_w=*/true);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const std::vector<at::Tensor> saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const std::vector<at::Tensor> weights(saved.begin() + 1, saved.end());
    const at::Tensor ends = ctx->saved_data["ends"].toTensor();
    const auto* gemm = reinterpret_cast<const GroupedGemm*>(
        static_cast<intptr_t>(ctx->saved_data["gemm"].toInt()));
    const double scale = ctx->saved_data["scale"].toDouble();
    const at::Tensor& dy = grads.at(0);
    // Inputs: x, ends, the weights, gemm, scale.
    torch::autograd::variable_list out;
    out.push_back(ctx->needs_input_grad(0) ? gemm->mm(dy, ends, weights, false) : at::Tensor());
    out.emplace_back();
    bool any_weight = false;
    for (size_t g = 0; g < weights.size(); ++g)
      any_weight = any_weight || ctx->needs_input_grad(2 + g);
    at::Tensor dw = any_weight ? gemm->weight_grads(dy, x, ends) : at::Tensor();
    if (any_weight && scale != 1.0) dw.mul_(scale);
    for (size_t g = 0; g < weights.size(); ++g)
      out.push_back(ctx->needs_input_grad(2 + g) ? dw[static_cast<int64_t>(g)] : at::Tensor());
    out.emplace_back();
    out.emplace_back();
    return out;
  }
};

}  // namespace

const GroupedGemm kReferenceGemm{reference_mm, reference_weight_grads};
const GroupedGemm kCudaGemm{cuda_kernels::grouped_mm, cuda_kernels::grouped_weight_grads};

namespace local {

at::Tensor run_experts(const at::Tensor& h, const at::Tensor& counts_in,
                       const std::vector<ExpertWeights>& experts, double grad_scale) {
  const at::Tensor counts = counts_in.to(at::kCPU, at::kLong).contiguous();
  VS_CHECK(counts.numel() == static_cast<int64_t>(experts.size()),
           "[kernels] run_experts: {} counts for {} experts", counts.numel(), experts.size());
  const int64_t* count = counts.data_ptr<int64_t>();
  int64_t total = 0;
  for (size_t e = 0; e < experts.size(); ++e) {
    VS_CHECK(count[e] >= 0, "[kernels] run_experts: expert {} takes {} rows", e, count[e]);
    total += count[e];
  }
  VS_CHECK(total == h.size(0), "[kernels] run_experts: counts of {} rows for {}", total, h.size(0));
  std::vector<at::Tensor> outputs;
  int64_t first = 0;
  for (size_t e = 0; e < experts.size(); ++e) {
    // An expert without rows runs too: its weights get a (zero) gradient like every parameter.
    const at::Tensor x = h.narrow(0, first, count[e]);
    first += count[e];
    const ExpertWeights& w = experts[e];
    const at::Tensor inner =
        at::silu(project(x, w.w1, w.lora1, grad_scale)) * project(x, w.w3, w.lora3, grad_scale);
    outputs.push_back(project(inner, w.w2, w.lora2, grad_scale));
  }
  return outputs.size() == 1 ? outputs.front() : at::cat(outputs);
}

}  // namespace local

at::Tensor grouped_experts(const at::Tensor& h, const at::Tensor& counts,
                           const std::vector<ExpertWeights>& experts, double grad_scale,
                           const GroupedGemm& gemm) {
  VS_CHECK(h.dim() == 2 && counts.dim() == 1 &&
               counts.size(0) == static_cast<int64_t>(experts.size()) && !experts.empty(),
           "[kernels] grouped_experts: rows [M, C] and a count for each of {} experts",
           experts.size());
  const at::Tensor ends = counts.to(h.device(), at::kLong).cumsum(0);
  const auto projection = [&](const at::Tensor& x, at::Tensor ExpertWeights::*weight,
                              ExpertAdapter ExpertWeights::*adapter) {
    std::vector<at::Tensor> w, a, b;
    for (const ExpertWeights& e : experts) {
      w.push_back(e.*weight);
      const ExpertAdapter& lora = e.*adapter;
      VS_CHECK(lora.on() == (experts.front().*adapter).on(),
               "[kernels] grouped_experts: a layer's experts are adapted alike");
      if (lora.on()) {
        a.push_back(lora.a);
        b.push_back(lora.b);
      }
    }
    const at::Tensor y = GroupedLinear::apply(x, ends, at::TensorList(w), &gemm, grad_scale);
    if (a.empty()) return y;
    const at::Tensor low = GroupedLinear::apply(x, ends, at::TensorList(a), &gemm, grad_scale);
    return y + GroupedLinear::apply(low, ends, at::TensorList(b), &gemm, grad_scale) *
                   (experts.front().*adapter).scaling;
  };
  const at::Tensor gate = projection(h, &ExpertWeights::w1, &ExpertWeights::lora1);
  const at::Tensor up = projection(h, &ExpertWeights::w3, &ExpertWeights::lora3);
  return projection(kernels::swiglu(gate, up), &ExpertWeights::w2, &ExpertWeights::lora2);
}

at::Tensor cuda_grouped_experts(const at::Tensor& h, const at::Tensor& counts,
                                const std::vector<ExpertWeights>& experts, double grad_scale) {
  return grouped_experts(h, counts, experts, grad_scale, kCudaGemm);
}

}  // namespace vescale
