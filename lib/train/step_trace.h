// Where a rank is in its step, for the flight recorder and the profile trace.
//
// NOTE [Profile trace]
// The schedule, the train step and the loop mark their phases with StepPhase: zero grad, forward
// and backward per micro-batch (and stage), a pipeline rank's sends, posted receives and bubble,
// grad sync, optimizer, stop agreement, evaluation, the metrics line and a checkpoint save (a
// step's span runs to the end of its save; the phases cover 98-100% of it on 4 ranks). A phase
// sets the flight recorder's micro-batch and site, so that each collective says where it was
// posted (NOTE [Flight recorder]); and while `train --profile FIRST-LAST` records a step, the
// phase's span is kept. After the last profiled step every rank hands its spans and the
// recorder's collectives and transfers of those steps to rank 0, which writes one Chrome trace,
// <dump_folder>/trace.json: a process per rank, a thread for its phases, one for its calls of
// comm/ (chrome://tracing and https://ui.perfetto.dev open it). Times are each rank's clock
// (microseconds since the epoch); on one machine they line up.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/flight_recorder.h"

namespace vescale {

/// A phase of a step on this rank, on the flight recorder's clock.
struct PhaseSpan {
  std::string name;  ///< "forward", "backward", "bubble", "grad sync", "optimizer", ...
  double start_s = 0, end_s = 0;
  int64_t step = -1;
  int micro_batch = -1;
  int stage = -1;
};

class StepTrace {
 public:
  explicit StepTrace(std::shared_ptr<comm::FlightRecorder> flight);

  comm::FlightRecorder& flight() { return *flight_; }
  /// Spans are kept only while recording (the profiled steps).
  void set_recording(bool on) { recording_ = on; }
  bool recording() const { return recording_; }
  void add(PhaseSpan span);
  /// The spans kept so far, handed over.
  std::vector<PhaseSpan> take();

 private:
  std::shared_ptr<comm::FlightRecorder> flight_;
  bool recording_ = false;
  std::vector<PhaseSpan> spans_;
};

/// One phase for the life of the scope: the recorder's site (and micro-batch, when given) say so,
/// and its span is kept while the trace records. A null trace does nothing.
class StepPhase {
 public:
  StepPhase(StepTrace* trace, const char* name, int micro_batch = -1, int stage = -1);
  ~StepPhase();
  StepPhase(const StepPhase&) = delete;
  StepPhase& operator=(const StepPhase&) = delete;

 private:
  StepTrace* trace_;
  const char* name_;
  int micro_batch_, stage_;
  double start_s_ = 0;
  std::string previous_site_;
};

}  // namespace vescale
