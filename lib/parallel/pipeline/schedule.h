// Pipeline schedules as data (docs/design.md §14): for each pp rank, the ordered list of what it
// does — forwards, backwards (whole, or split into input-grad I and weight-grad W halves) and the
// point-to-point sends and receives between them. Schedules are generated here, validated and
// simulated without running a model; the executor only walks the lists. Where each part lives:
// schedule_action.cpp (actions and their text form), schedule.cpp (placing stages, making a
// schedule), schedule_generators.cpp (the table of schedules: their needs, compute orders and
// bubbles), schedule_events.cpp (the data flow between actions), schedule_comm.cpp (sends and
// receives), schedule_validate.cpp, schedule_simulate.cpp and schedule_timeline.cpp.
//
// NOTE [Schedule actions]
// An action is (kind, stage, micro-batch), written as torch.distributed.pipelining writes it:
// "1F0" (stage 1 forward of micro-batch 0), "2B3" (full backward), "0I1" / "0W1" (input-grad /
// weight-grad halves), "1SEND_F0" (stage 1 sends the output of its forward of micro-batch 0 to
// stage 2), "2RECV_F0" (stage 2 receives it), "2SEND_B3" (stage 2 sends the gradient of its
// input to stage 1), "1RECV_B3" (stage 1 receives it). A SEND_F of stage s matches the RECV_F of
// stage s+1, a SEND_B of stage s the RECV_B of stage s-1. Sends are non-blocking (isend); a
// receive is posted where it stands and waited for by the compute action that needs it.
// Per pair of ranks, sends and receives match in list order (NCCL and Gloo pair p2p messages
// between two ranks first-in first-out), which validate() checks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vescale::pipeline {

enum class ActionKind {
  kForward,
  kBackward,        ///< full backward (input and weight gradients)
  kBackwardInput,   ///< I: the input gradient only (what the previous stage waits for)
  kBackwardWeight,  ///< W: the weight gradient, deferrable
  kSendActivation,
  kRecvActivation,
  kSendGrad,
  kRecvGrad,
};

struct Action {
  ActionKind kind;
  int stage;
  int micro;

  bool operator==(const Action& o) const {
    return kind == o.kind && stage == o.stage && micro == o.micro;
  }
  bool operator!=(const Action& o) const { return !(*this == o); }
};

/// Forward, backward, I or W (not a send or receive).
bool is_compute(ActionKind kind);
/// The compact text form: "1F0", "2B3", "0I1", "0W1", "1SEND_F0", "2RECV_B3".
std::string to_string(const Action& action);
/// Parses the compact text form; throws UserError naming the text otherwise.
Action parse_action(const std::string& text);

struct PipelineSchedule {
  std::string name;
  int pp = 1;
  int virtual_stages = 1;  ///< stages per rank
  int microbatches = 1;
  std::vector<int> stage_rank;  ///< stage -> pp rank
  /// Per pp rank, in execution order, sends and receives included.
  std::vector<std::vector<Action>> ranks;

  int stages() const { return static_cast<int>(stage_rank.size()); }
};

/// Where stages live. Loop: stage s on rank s mod pp (gpipe, 1f1b, interleaved). V: rank r holds
/// stages r and 2·pp−1−r (zbv), so the middle turn and the ends stay on one rank.
enum class StagePlacement { kLoop, kV };
/// Stage -> rank for `pp` ranks holding `virtual_stages` stages each (kV needs 2).
std::vector<int> place_stages(StagePlacement placement, int pp, int virtual_stages);

/// The schedule names make_schedule knows: gpipe, 1f1b, interleaved-1f1b, zbv, zb-h1 (the rows
/// of the table in schedule_generators.cpp).
const std::vector<std::string>& schedule_names();
/// The schedule `name` for `pp` ranks with `virtual_stages` stages each and `microbatches`
/// micro-batches, with its sends and receives; validated. Throws UserError on a combination the
/// schedule does not support, saying what would work.
PipelineSchedule make_schedule(const std::string& name, int pp, int virtual_stages,
                               int microbatches);

/// Per rank, the compute-only orders `compute` with sends and receives added: each SEND right
/// after the action that produces it, each RECV as early as is safe (NOTE [Placing receives]),
/// none between stages on the same rank. Throws Error if the orders cannot make progress.
std::vector<std::vector<Action>> add_communication(const std::vector<std::vector<Action>>& compute,
                                                   const std::vector<int>& stage_rank);

/// Checks a schedule's structure: every (stage, micro) has one F and either one B or one I and
/// one W, all on the stage's rank; on a rank F comes before its B or I, I before W, and each
/// action after its input from a stage on the same rank; every SEND matches one RECV on the peer
/// rank, in the same order per pair of ranks, and only between stages on different ranks.
/// Throws Error naming the rank and the action.
void validate(const PipelineSchedule& schedule);

/// A compute action placed in time by simulate().
struct TimedAction {
  Action action;
  int64_t start = 0;
  int64_t end = 0;
};

struct Simulation {
  bool deadlock_free = false;
  int64_t makespan = 0;       ///< when the last rank finishes
  std::vector<int64_t> busy;  ///< per rank: time spent computing
  double bubble = 0;          ///< idle / (pp · makespan)
  /// Per stage: the most micro-batches whose F ran but whose B (or I) has not.
  std::vector<int> peak_stashed;
  /// Per rank, its compute actions in time (those that ran).
  std::vector<std::vector<TimedAction>> runs;
  /// When not deadlock free: per stuck rank, its next action and what it waits for.
  std::vector<std::string> stuck;
};

/// Runs the schedule on an idealised machine: each rank executes its list in order; F costs
/// `f_cost`, B `b_cost`, I and W half of it each (I rounded down); sends and receives take no
/// time and sends never block; a compute action starts when its rank is free and its input is
/// there (the producing action finished and, across ranks, sent, and the RECV posted). Never
/// hangs: when no rank can progress the result names the stuck actions.
Simulation simulate(const PipelineSchedule& schedule, int64_t f_cost = 1, int64_t b_cost = 2);

/// The bubble fraction theory gives for a schedule at F = 1, B = 2 (I = W = 1): NOTE [Analytic
/// bubbles]. For zbv that is a lower bound, which its order meets from 2·pp−1 micro-batches on.
double analytic_bubble(const std::string& name, int pp, int virtual_stages, int microbatches);
/// analytic_bubble's formula as text: "(p-1)/(m+p-1)".
std::string bubble_formula(const std::string& name);

/// The simulation as text: one row per rank, one column per time unit ("1F0" where an action
/// starts, "~" while it continues, "." idle), then the bubble.
std::string timeline(const PipelineSchedule& schedule, const Simulation& simulation);
/// The schedule's lists, one line per rank ("rank 0: 0F0 0SEND_F0 ...").
std::string format_actions(const PipelineSchedule& schedule);

}  // namespace vescale::pipeline
