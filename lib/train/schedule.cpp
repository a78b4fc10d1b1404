#include "train/schedule.h"

#include <ATen/ATen.h>

#include "core/clock.h"
#include "core/error.h"

namespace vescale {

void Schedule::on_last_backward(std::function<void()> listener) {
  listeners_.push_back(std::move(listener));
}

void Schedule::notify_last_backward() const {
  for (const auto& listener : listeners_)
    listener();
}

GradientAccumulation::GradientAccumulation(int64_t microbatches, ForwardLoss forward_loss)
    : microbatches_(microbatches), forward_loss_(std::move(forward_loss)) {
  VS_CHECK(microbatches >= 1, "[train] {} micro-batches: need at least one", microbatches);
}

at::Tensor GradientAccumulation::run(const MicroBatches& batches) {
  times_ = {};
  std::vector<at::Tensor> losses;
  for (int64_t micro = 0; micro < microbatches_; ++micro) {
    const int m = static_cast<int>(micro);
    auto start = Clock::now();
    DTensor loss = [&] {
      const StepPhase phase(trace_, "forward", m);
      return forward_loss_(batches(micro));
    }();
    times_.forward_s += seconds_since(start);
    if (micro + 1 == microbatches_) notify_last_backward();
    start = Clock::now();
    {
      const StepPhase phase(trace_, "backward", m);
      (loss.to_local() / static_cast<double>(microbatches_)).backward();
      losses.push_back(loss.to_local().detach().to(at::kDouble));
    }
    times_.backward_s += seconds_since(start);
  }
  return at::stack(losses);
}

}  // namespace vescale
