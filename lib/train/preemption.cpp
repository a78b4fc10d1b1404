#include "train/preemption.h"

#include <signal.h>

#include <ATen/ATen.h>

#include <atomic>

#include "core/error.h"
#include "core/stop_signals.h"

namespace vescale {
namespace {

std::atomic<bool> g_installed{false};
struct sigaction g_old_int {};
struct sigaction g_old_term {};
struct sigaction g_old_hup {};

/// Async-signal-safe: an atomic store, or (a signal after the first's window: NOTE [One stop
/// request, several signals]) the default action re-raised.
void on_stop_signal(int sig) {
  switch (note_stop_signal(sig)) {
    case StopSignal::kFirst:
    case StopSignal::kSameRequest:
      return;
    case StopSignal::kForce:
      ::signal(sig, SIG_DFL);
      ::raise(sig);
  }
}

}  // namespace

PreemptionHandler::PreemptionHandler() {
  VS_CHECK(!g_installed.exchange(true), "[preempt] a PreemptionHandler is already installed");
  reset_stop_signals();
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // the collectives' socket calls go on where they were
  ::sigaction(SIGINT, &action, &g_old_int);
  ::sigaction(SIGTERM, &action, &g_old_term);
  // A closed terminal (SIGHUP) ends a run as SIGINT and SIGTERM do: saving the step first.
  ::sigaction(SIGHUP, &action, &g_old_hup);
}

PreemptionHandler::~PreemptionHandler() {
  ::sigaction(SIGINT, &g_old_int, nullptr);
  ::sigaction(SIGTERM, &g_old_term, nullptr);
  ::sigaction(SIGHUP, &g_old_hup, nullptr);
  g_installed = false;
}

int preemption_signal() {
  return stop_request_signal();
}

StopAgreement::StopAgreement(const comm::Group& world)
    : flag_(at::full({1}, stop_request_signal() != 0 ? 1.0f : 0.0f,
                     at::dtype(at::kFloat).device(world.device()))),
      work_(world.all_reduce_async(flag_, comm::ReduceOp::kMax)) {}

bool StopAgreement::wait() {
  work_.wait();
  return flag_.item<float>() != 0.0f;
}

}  // namespace vescale
