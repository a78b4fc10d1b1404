#include "autoplan/comm_time.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "config/expert_volume.h"
#include "config/ring_volume.h"

namespace vescale::autoplan {
namespace {

/// The gradient reduction (and parameter gathers) per step over `replicas` ranks, as the ZeRO
/// stage does it, of `grad_bytes`: the gradients of the rank's stages before ZeRO divides them.
double dp_comm_time(const Shape& s, double grad_bytes, int64_t replicas, double blocks,
                    const MachineFacts& facts) {
  const JobConfig& c = s.c;
  const double bucket = std::max(1.0, c.bucket_mb * 1024 * 1024);
  const double buckets = std::ceil(grad_bytes / bucket);
  auto per_bucket = [&](const std::string& op) {
    return buckets * facts.fit(op, replicas).time(grad_bytes / buckets);
  };
  switch (c.zero) {
    case 0:
      return per_bucket("all_reduce");
    case 1:
      return per_bucket("all_reduce") + per_bucket("all_gather");
    case 2:
      return per_bucket("reduce_scatter") + per_bucket("all_gather");
    default: {
      // Each block's parameters gathered before its forward and its backward, gradients
      // reduce-scattered after its backward, per micro-batch.
      const double per_block = grad_bytes / std::max(1.0, blocks + 1.0);
      return s.m * (blocks + 1.0) *
             (2.0 * facts.fit("all_gather", replicas).time(per_block) +
              facts.fit("reduce_scatter", replicas).time(per_block));
    }
  }
}

/// The replicas' gradient reduction: the dense parameters' over dp x cp, the experts' over
/// their own replicas, dp x cp / ep; one reduction where those are the same ranks (ep = 1).
double replicas_comm_time(const Shape& s, const StateMemory& mine, double blocks,
                          const MachineFacts& facts) {
  // The whole stages' gradients: ZeRO 2-3 hold 1 / replicas of them.
  const double dense = (mine.grads - mine.expert_grads) * (s.c.zero >= 2 ? s.dp : 1.0);
  const double experts = mine.expert_grads * (s.c.zero >= 2 ? s.expert_dp : 1.0);
  const auto replicas = static_cast<int64_t>(s.dp);
  const auto expert_replicas = static_cast<int64_t>(s.expert_dp);
  if (mine.expert_grads == 0 || expert_replicas == replicas)
    return replicas > 1 ? dp_comm_time(s, dense + experts, replicas, blocks, facts) : 0.0;
  double out = replicas > 1 ? dp_comm_time(s, dense, replicas, blocks, facts) : 0.0;
  if (expert_replicas > 1) out += dp_comm_time(s, experts, expert_replicas, blocks, facts);
  return out;
}

/// ep's all-to-alls per step (config/expert_volume.h): per MoE block and micro-batch, those of
/// the counts and of the routed rows, each priced for its whole buffer as comm bench times one.
double ep_comm_time(const Shape& s, double blocks, const MachineFacts& facts) {
  const ExpertVolume v = expert_volume(s.c);
  if (v.calls == 0) return 0.0;
  const CommFit& fit = all_to_all_fit(facts, s.c.ep);
  return s.m * blocks *
         (v.row_exchanges * fit.time(v.routed_rows * v.row_bytes) +
          v.count_exchanges * fit.time(v.count_bytes));
}

}  // namespace

const CommFit& all_to_all_fit(const MachineFacts& facts, int64_t ep) {
  const auto measured = facts.comm.find("all_to_all");
  if (measured != facts.comm.end() && measured->second.count(ep)) return measured->second.at(ep);
  return facts.fit("all_gather", ep);
}

CommTimes comm_times(const Shape& s, const StateMemory& mine, double blocks,
                     const MachineFacts& facts) {
  const JobConfig& c = s.c;
  CommTimes comm;
  const double act_bytes = s.tokens * s.C * s.size;
  if (c.tp > 1) {
    // Their latency is in the framework time measured at this tp; here, their bytes.
    const double calls = s.m * (4.0 * blocks + 2.0);  // two per block forward, two back; head
    if (s.sp) {
      comm.tp = calls * act_bytes *
                (1.0 / facts.fit("all_gather", c.tp).bytes_per_s +
                 1.0 / facts.fit("reduce_scatter", c.tp).bytes_per_s);
    } else {
      comm.tp = calls * act_bytes / facts.fit("all_reduce", c.tp).bytes_per_s;
    }
  }
  comm.dp = replicas_comm_time(s, mine, blocks, facts);
  if (c.cp > 1) {
    // The ring's key/value chunks (and their gradients) to the next cp rank, per block and
    // micro-batch: config/ring_volume.h.
    const RingVolume ring = ring_volume(c);
    comm.cp =
        s.m * blocks * ring.sends_per_call * facts.fit("send_recv", c.cp).time(ring.kv_pair_bytes);
  }
  if (c.pp > 1) {
    const double crossing = s.sp ? act_bytes / s.tp : act_bytes;
    // Each of the rank's stages sends its output (or receives its input) and the gradient back.
    const double transfers = 2.0 * static_cast<double>(c.pp_virtual);
    comm.pp = s.m * transfers * facts.fit("send_recv", c.pp).time(crossing);
  }
  if (c.ep > 1) comm.ep = ep_comm_time(s, blocks, facts);
  // Every step: the loss, the gradient norm and the stop flag, each one small all-reduce.
  const int64_t world = c.world_size();
  if (world > 1) comm.steps = 3.0 * facts.fit("all_reduce", world).alpha_s;
  return comm;
}

}  // namespace vescale::autoplan
