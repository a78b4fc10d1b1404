// The layouts `plan auto` chooses from (NOTE [Plan auto]): how N ranks split into pp x dp x cp x
// tp (for a mixture of experts, with ep carved from dp), with or without sequence parallelism,
// which ZeRO stage, how many micro-batches, and for pp > 1 which schedule with how many stages
// per rank. Every layout enumerated passes the checks of
// `plan lint` and `plan schedule`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/job_config.h"

namespace vescale::autoplan {

struct Layout {
  int64_t pp = 1, dp = 1, tp = 1;
  bool sp = false;   ///< sequence parallel (the plan's -sp variant)
  int64_t zero = 0;  ///< ZeRO stage over dp
  int64_t microbatches = 1;
  std::string schedule = "1f1b";           ///< pp > 1 only
  int64_t virtual_stages = 1;              ///< pp > 1 only
  std::string plan;                        ///< zoo plan; empty: replicate everything (tp = 1)
  Recompute recompute = Recompute::kNone;  ///< training.activation_checkpoint
  int64_t cp = 1;  ///< context parallel ranks (a transformer's sequences split)
  int64_t ep =
      1;  ///< expert parallel ranks among the dp ones (a mixture of experts' experts split)

  /// The config overrides that select this layout: "parallel.pp=2", ...
  std::vector<std::string> overrides() const;
  /// "pp=2 dp=1 tp=2 sp zero=0 mb=4 1f1b" (" ep=2" after dp under expert parallelism, " cp=2"
  /// after that under context parallelism, and " ac=full" under activation checkpointing)
  std::string str() const;
};

/// Every layout of `nproc` ranks for `base`'s model and batch, with the reason each rejected
/// combination failed.
struct Enumeration {
  std::vector<Layout> valid;
  int64_t considered = 0;
  std::vector<std::string> rejected;  ///< "pp=4 ...: <the lint error>"
};

Enumeration enumerate_layouts(const JobConfig& base, int64_t nproc);

/// `base` with `layout`'s overrides applied, checked as `train` checks a config.
JobConfig layout_config(const JobConfig& base, const Layout& layout);

}  // namespace vescale::autoplan
