#include "train/step_trace.h"

#include <fmt/format.h>

namespace vescale {

StepTrace::StepTrace(std::shared_ptr<comm::FlightRecorder> flight) : flight_(std::move(flight)) {}

void StepTrace::add(PhaseSpan span) {
  if (recording_) spans_.push_back(std::move(span));
}

std::vector<PhaseSpan> StepTrace::take() {
  std::vector<PhaseSpan> out;
  out.swap(spans_);
  return out;
}

StepPhase::StepPhase(StepTrace* trace, const char* name, int micro_batch, int stage)
    : trace_(trace), name_(name), micro_batch_(micro_batch), stage_(stage) {
  if (trace_ == nullptr) return;
  comm::FlightRecorder& flight = trace_->flight();
  const std::string site = stage >= 0 ? fmt::format("{} stage {}", name, stage) : name;
  previous_site_ = flight.set_site(site);
  if (micro_batch >= 0) flight.set_micro_batch(micro_batch);
  start_s_ = flight.clock_s(comm::FlightRecorder::Clock::now());
}

StepPhase::~StepPhase() {
  if (trace_ == nullptr) return;
  comm::FlightRecorder& flight = trace_->flight();
  if (micro_batch_ >= 0) flight.set_micro_batch(-1);
  flight.set_site(previous_site_);
  if (trace_->recording())
    trace_->add({name_, start_s_, flight.clock_s(comm::FlightRecorder::Clock::now()), flight.step(),
                 micro_batch_, stage_});
}

}  // namespace vescale
