#include "autoplan/comm_time.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "config/ring_volume.h"

namespace vescale::autoplan {
namespace {

/// dp's gradient reduction (and parameter gathers) per step, as the ZeRO stage does it.
double dp_comm_time(const Shape& s, const StateMemory& mine, double blocks,
                    const MachineFacts& facts) {
  const JobConfig& c = s.c;
  const double grad_bytes = mine.grads * (c.zero >= 2 ? s.dp : 1.0);  // the whole stage's
  const double bucket = std::max(1.0, c.bucket_mb * 1024 * 1024);
  const double buckets = std::ceil(grad_bytes / bucket);
  const auto replicas = static_cast<int64_t>(s.dp);
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

}  // namespace

/// Communication on the busiest rank per step: tp's activations, the replicas' (dp x cp)
/// gradients, cp's ring, pp's transfers and the few small all-reduces every step makes.
double comm_time(const Shape& s, const StateMemory& mine, double blocks,
                 const MachineFacts& facts) {
  const JobConfig& c = s.c;
  double comm = 0;
  const double act_bytes = s.tokens * s.C * s.size;
  if (c.tp > 1) {
    // Their latency is in the framework time measured at this tp; here, their bytes.
    const double calls = s.m * (4.0 * blocks + 2.0);  // two per block forward, two back; head
    if (s.sp) {
      comm += calls * act_bytes *
              (1.0 / facts.fit("all_gather", c.tp).bytes_per_s +
               1.0 / facts.fit("reduce_scatter", c.tp).bytes_per_s);
    } else {
      comm += calls * act_bytes / facts.fit("all_reduce", c.tp).bytes_per_s;
    }
  }
  if (s.dp > 1) comm += dp_comm_time(s, mine, blocks, facts);
  if (c.cp > 1) {
    // The ring's key/value chunks (and their gradients) to the next cp rank, per block and
    // micro-batch: config/ring_volume.h.
    const RingVolume ring = ring_volume(c);
    comm +=
        s.m * blocks * ring.sends_per_call * facts.fit("send_recv", c.cp).time(ring.kv_pair_bytes);
  }
  if (c.pp > 1) {
    const double crossing = s.sp ? act_bytes / s.tp : act_bytes;
    // Each of the rank's stages sends its output (or receives its input) and the gradient back.
    const double transfers = 2.0 * static_cast<double>(c.pp_virtual);
    comm += s.m * transfers * facts.fit("send_recv", c.pp).time(crossing);
  }
  // Every step: the loss, the gradient norm and the stop flag, each one small all-reduce.
  const int64_t world = c.world_size();
  if (world > 1) comm += 3.0 * facts.fit("all_reduce", world).alpha_s;
  return comm;
}

}  // namespace vescale::autoplan
