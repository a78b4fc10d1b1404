#include "train/pipeline_runner.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/grad_mode.h>

#include "core/clock.h"
#include "core/error.h"

namespace vescale {
namespace {

using pipeline::ActionKind;

constexpr int64_t kHeader = 40;  // int64 slots of a boundary header

/// A spec's dtype, global shape and placements as int64s (the one-time boundary exchange).
at::Tensor encode_boundary(const DTensorSpec& spec, at::ScalarType dtype) {
  std::vector<int64_t> h{static_cast<int64_t>(dtype), spec.ndim()};
  h.insert(h.end(), spec.shape.begin(), spec.shape.end());
  h.push_back(static_cast<int64_t>(spec.placements.size()));
  for (const Placement& p : spec.placements) {
    h.push_back(static_cast<int64_t>(p.kind));
    h.push_back(p.is_partial() ? static_cast<int64_t>(p.reduce) : p.dim);
  }
  VS_CHECK(static_cast<int64_t>(h.size()) <= kHeader, "[pipeline] boundary {} too large",
           spec.str());
  h.resize(kHeader, 0);
  return at::tensor(h, at::kLong);
}

std::pair<DTensorSpec, at::ScalarType> decode_boundary(const at::Tensor& header,
                                                       const DeviceMesh& mesh) {
  const at::Tensor h = header.cpu();
  const int64_t* v = h.data_ptr<int64_t>();
  const auto dtype = static_cast<at::ScalarType>(v[0]);
  const int64_t ndim = v[1];
  std::vector<int64_t> shape(v + 2, v + 2 + ndim);
  const int64_t n = v[2 + ndim];
  Placements placements;
  for (int64_t i = 0; i < n; ++i) {
    const auto kind = static_cast<PlacementKind>(v[3 + ndim + 2 * i]);
    const int64_t arg = v[4 + ndim + 2 * i];
    placements.push_back(kind == PlacementKind::kShard ? Placement::shard(arg)
                         : kind == PlacementKind::kPartial
                             ? Placement::partial(static_cast<comm::ReduceOp>(arg))
                             : Placement::replicate());
  }
  return {DTensorSpec(mesh, placements, shape), dtype};
}

}  // namespace

PipelineRunner::PipelineRunner(Task& task, const JobMesh& mesh, pipeline::PipelineSchedule schedule,
                               std::vector<StageLayers> stages, const Batch& sample,
                               LayerRunner run_layers)
    : task_(task),
      run_layers_(run_layers
                      ? std::move(run_layers)
                      : [&task](int64_t first, int64_t end, const Tensors& in,
                                const ForwardContext&
                                    context) { return task.run_layers(first, end, in, context); }),
      mesh_(mesh),
      schedule_(std::move(schedule)),
      stages_(std::move(stages)),
      rank_(static_cast<int>(mesh.pp_rank())),
      boundary_(schedule_.stages()),
      dtypes_(schedule_.stages(), at::kFloat) {
  VS_CHECK(static_cast<int>(stages_.size()) == schedule_.stages(),
           "[pipeline] {} stage layer ranges for {} stages", stages_.size(), schedule_.stages());
  VS_CHECK(schedule_.pp == mesh.pp(), "[pipeline] a schedule for pp = {} on {}", schedule_.pp,
           mesh.str());
  const auto& actions = schedule_.ranks[rank_];
  for (size_t i = 0; i < actions.size(); ++i) {
    if (actions[i].kind == ActionKind::kBackward || actions[i].kind == ActionKind::kBackwardWeight)
      last_backward_ = i;
  }
  boundaries(sample);
}

bool PipelineRunner::has_last_stage() const {
  return local(schedule_.stages() - 1);
}

int PipelineRunner::tag(bool gradient, int stage, int micro) const {
  return ((gradient ? 1 : 0) * schedule_.stages() + stage) * schedule_.microbatches + micro;
}

void PipelineRunner::boundaries(const Batch& sample) {
  // Stage by stage along the pipeline: the rank of stage s runs it without gradients on a batch
  // of the right shape (zeros past stage 0: placements and shapes do not depend on values) and
  // tells the rank of stage s + 1 what its output looks like.
  torch::autograd::AutoGradMode no_grad(false);
  const DeviceMesh& mesh = mesh_.param_mesh();
  const comm::Group& pp = mesh_.group("pp");
  for (int s = 0; s + 1 < schedule_.stages(); ++s) {
    const int holder = schedule_.stage_rank[s], next = schedule_.stage_rank[s + 1];
    if (holder == rank_) {
      Tensors in;
      if (s == 0) {
        in = task_.inputs(sample, mesh);
      } else {
        const DTensorSpec& spec = *boundary_[s - 1];
        in = {DTensor(
            at::zeros(spec.local_shape(), at::TensorOptions(dtypes_[s - 1]).device(mesh.device())),
            spec)};
      }
      const DTensor out = run_layers_(stages_[s].first, stages_[s].end, in, sample.context).at(0);
      boundary_[s] = out.spec();
      dtypes_[s] = out.dtype();
      if (next != rank_) pp.send(encode_boundary(out.spec(), out.dtype()).to(mesh.device()), next);
    } else if (next == rank_) {
      at::Tensor header = at::empty({kHeader}, at::TensorOptions(at::kLong).device(mesh.device()));
      pp.recv(header, holder);
      auto [spec, dtype] = decode_boundary(header, mesh);
      boundary_[s] = spec;
      dtypes_[s] = dtype;
    }
  }
}

void PipelineRunner::wait_idle(comm::Work& work) {
  const StepPhase phase(trace_, "bubble");
  const auto start = Clock::now();
  work.wait();
  stats_.idle_s += seconds_since(start);
}

at::Tensor PipelineRunner::run(const MicroBatches& batches) {
  const auto start = Clock::now();
  const double idle_before = stats_.idle_s;
  times_ = {};
  at::Tensor losses = at::zeros({schedule_.microbatches},
                                at::TensorOptions(at::kDouble).device(mesh_.mesh().device()));
  slots_.clear();
  sends_.clear();
  const auto& actions = schedule_.ranks[rank_];
  // An action's time, but what it waited idle for another stage.
  auto timed = [this](double& into, const std::function<void()>& action) {
    const double idle = stats_.idle_s;
    const auto begin = Clock::now();
    action();
    into += seconds_since(begin) - (stats_.idle_s - idle);
  };
  for (size_t i = 0; i < actions.size(); ++i) {
    const pipeline::Action& a = actions[i];
    switch (a.kind) {
      case ActionKind::kForward:
        timed(times_.forward_s, [&] {
          const StepPhase phase(trace_, "forward", a.micro, a.stage);
          forward(a.stage, a.micro, batches, losses);
        });
        break;
      case ActionKind::kBackward:
      case ActionKind::kBackwardInput:
      case ActionKind::kBackwardWeight:
        if (i == last_backward_) notify_last_backward();
        timed(times_.backward_s, [&] {
          const StepPhase phase(trace_,
                                a.kind == ActionKind::kBackwardInput    ? "backward input"
                                : a.kind == ActionKind::kBackwardWeight ? "backward weight"
                                                                        : "backward",
                                a.micro, a.stage);
          backward(a.stage, a.micro, a.kind);
        });
        break;
      case ActionKind::kSendActivation:
      case ActionKind::kSendGrad: {
        const StepPhase phase(trace_, "send", a.micro, a.stage);
        send(a.stage, a.micro, a.kind == ActionKind::kSendGrad);
        break;
      }
      case ActionKind::kRecvActivation:
      case ActionKind::kRecvGrad: {
        const StepPhase phase(trace_, "post receive", a.micro, a.stage);
        post_receive(a.stage, a.micro, a.kind == ActionKind::kRecvGrad);
        break;
      }
    }
  }
  for (auto& [work, buffer] : sends_)
    wait_idle(work);
  sends_.clear();
  slots_.clear();
  stats_.steps += 1;
  stats_.step_s += seconds_since(start);
  times_.idle_s = stats_.idle_s - idle_before;
  return losses;
}

Tensors PipelineRunner::stage_inputs(int stage, int micro) {
  const DeviceMesh& mesh = mesh_.param_mesh();
  Slot& slot = this->slot(stage, micro);
  if (stage == 0) return task_.inputs(slot.batch, mesh);
  at::Tensor local;
  DTensorSpec spec = *boundary_[stage - 1];
  if (this->local(stage - 1)) {
    const DTensor& previous = *this->slot(stage - 1, micro).output;
    local = previous.to_local().detach();
    spec = previous.spec();
  } else {
    wait_idle(slot.activation_receive);
    local = slot.activation;
  }
  slot.input = DTensor(local.requires_grad_(true), spec);
  return {*slot.input};
}

void PipelineRunner::forward(int stage, int micro, const MicroBatches& batches,
                             at::Tensor& losses) {
  Slot& s = slot(stage, micro);
  // Every stage asks for its batch: its forward context (the dropout masks' step and rows) comes
  // with it.
  s.batch = batches(micro);
  const Tensors in = stage_inputs(stage, micro);
  const Tensors out = run_layers_(stages_[stage].first, stages_[stage].end, in,
                                  is_last(stage) ? task_.loss_context(s.batch) : s.batch.context);
  int& in_flight = in_flight_[stage];
  stats_.peak_in_flight[stage] = std::max(stats_.peak_in_flight[stage], ++in_flight);
  if (is_last(stage)) {
    const DTensor loss = task_.loss_of(out, s.batch, mesh_.param_mesh());
    losses.select(0, micro).copy_(loss.to_local().detach());
    s.loss = loss.to_local() / static_cast<double>(schedule_.microbatches);
  } else {
    s.output = out.at(0);
  }
}

std::pair<at::Tensor, at::Tensor> PipelineRunner::backward_start(int stage, int micro) {
  Slot& s = slot(stage, micro);
  if (is_last(stage)) return {s.loss, at::Tensor()};
  if (!s.output_grad.defined()) {
    if (local(stage + 1)) {
      s.output_grad = slot(stage + 1, micro).input_grad;
    } else {
      wait_idle(s.grad_receive);
      s.output_grad = s.grad;
    }
  }
  VS_CHECK(s.output_grad.defined(), "[pipeline] no gradient for the output of stage {} micro {}",
           stage, micro);
  return {s.output->to_local(), s.output_grad};
}

void PipelineRunner::backward(int stage, int micro, ActionKind kind) {
  Slot& s = slot(stage, micro);
  auto [root, grad] = backward_start(stage, micro);
  const std::vector<at::Tensor> grads =
      grad.defined() ? std::vector<at::Tensor>{grad} : std::vector<at::Tensor>{};
  if (kind != ActionKind::kBackwardWeight) --in_flight_[stage];  // B or I frees the stash
  if (!root.requires_grad()) {
    // The first stage of a LoRA job (NOTE [LoRA]) whose layers hold no adapter: nothing in it
    // trains, and it has no input to send a gradient to.
    if (kind != ActionKind::kBackwardInput) {
      s.output.reset();
      s.loss = at::Tensor();
    }
    return;
  }
  if (kind == ActionKind::kBackwardInput) {
    // I: the input gradient only; the graph stays for W.
    if (stage > 0) {
      s.input_grad = torch::autograd::grad({root}, {s.input->to_local()}, grads,
                                           /*retain_graph=*/true)
                         .at(0);
    }
    return;
  }
  if (kind == ActionKind::kBackwardWeight) {
    // W: the stage's weight gradients only (none where a LoRA job's stage holds no adapter: an
    // empty list would mean every leaf).
    if (!stages_[stage].params.empty()) {
      torch::autograd::backward({root}, grads, /*retain_graph=*/false, /*create_graph=*/false,
                                stages_[stage].params);
    }
  } else {
    torch::autograd::backward({root}, grads);
    if (stage > 0) s.input_grad = s.input->to_local().grad();
  }
  s.output.reset();
  s.loss = at::Tensor();
}

void PipelineRunner::post_receive(int stage, int micro, bool gradient) {
  Slot& s = slot(stage, micro);
  const comm::Group& pp = mesh_.group("pp");
  const int boundary = gradient ? stage : stage - 1;
  const at::TensorOptions options =
      at::TensorOptions(dtypes_[boundary]).device(mesh_.param_mesh().device());
  at::Tensor buffer = at::empty(boundary_[boundary]->local_shape(), options);
  if (gradient) {
    s.grad = buffer;
    s.grad_receive = pp.irecv(s.grad, schedule_.stage_rank[stage + 1], tag(true, stage, micro));
  } else {
    s.activation = buffer;
    s.activation_receive =
        pp.irecv(s.activation, schedule_.stage_rank[stage - 1], tag(false, stage, micro));
  }
}

void PipelineRunner::send(int stage, int micro, bool gradient) {
  Slot& s = slot(stage, micro);
  const comm::Group& pp = mesh_.group("pp");
  if (gradient) {
    const at::Tensor t = s.input_grad.contiguous();
    sends_.emplace_back(pp.isend(t, schedule_.stage_rank[stage - 1], tag(true, stage - 1, micro)),
                        t);
  } else {
    const at::Tensor t = s.output->to_local().detach().contiguous();
    sends_.emplace_back(pp.isend(t, schedule_.stage_rank[stage + 1], tag(false, stage + 1, micro)),
                        t);
  }
}

std::optional<DTensor> PipelineRunner::forward_outputs(const Batch& batch) {
  return forward_through(batch, batch.context);
}

std::optional<DTensor> PipelineRunner::forward_through(const Batch& batch,
                                                       const ForwardContext& last) {
  // Stage after stage with blocking transfers (a chain: no deadlock). The batch may have other
  // rows and another sequence length than a training micro-batch, so each transfer first says
  // the activation's global shape; its placements are the boundary's.
  torch::autograd::AutoGradMode no_grad(false);
  const DeviceMesh& mesh = mesh_.param_mesh();
  const comm::Group& pp = mesh_.group("pp");
  const at::TensorOptions longs = at::TensorOptions(at::kLong).device(mesh.device());
  std::optional<DTensor> carried;
  for (int s = 0; s < schedule_.stages(); ++s) {
    if (!local(s)) continue;
    Tensors in;
    if (s == 0) {
      in = task_.inputs(batch, mesh);
    } else if (local(s - 1)) {
      in = {*carried};
    } else {
      const DTensorSpec& boundary = *boundary_[s - 1];
      at::Tensor shape = at::empty({boundary.ndim()}, longs);
      pp.recv(shape, schedule_.stage_rank[s - 1]);
      const at::Tensor host = shape.cpu();
      const DTensorSpec spec = boundary.with_shape(std::vector<int64_t>(
          host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + boundary.ndim()));
      at::Tensor data =
          at::empty(spec.local_shape(), at::TensorOptions(dtypes_[s - 1]).device(mesh.device()));
      pp.recv(data, schedule_.stage_rank[s - 1]);
      in = {DTensor(data, spec)};
    }
    DTensor out =
        run_layers_(stages_[s].first, stages_[s].end, in, is_last(s) ? last : batch.context).at(0);
    if (is_last(s)) return out;
    if (local(s + 1)) {
      carried = std::move(out);
    } else {
      pp.send(at::tensor(out.shape(), at::kLong).to(mesh.device()), schedule_.stage_rank[s + 1]);
      pp.send(out.to_local().contiguous(), schedule_.stage_rank[s + 1]);
    }
  }
  return std::nullopt;
}

double PipelineRunner::forward_loss(const Batch& batch) {
  const std::optional<DTensor> out = forward_through(batch, task_.loss_context(batch));
  if (!out) return 0;
  return task_.loss_of({*out}, batch, mesh_.param_mesh()).to_local().item<double>();
}

}  // namespace vescale
