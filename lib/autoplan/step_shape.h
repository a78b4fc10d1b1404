// The sizes every part of `plan auto`'s prediction reads (NOTE [Plan auto]): one layout's config,
// its model and the per-rank shape of a micro-batch.
#pragma once

#include "autoplan/layout.h"
#include "autoplan/layout_model.h"

namespace vescale::autoplan {

/// What every step of the prediction reads: the layout's config, model and sizes.
struct Shape {
  const JobConfig& c;
  const LayoutModel& lm;
  TransformerShape model;
  double vocab;  ///< padded for the layout's tp
  double tp, dp, m, b, t, C, heads;
  double cp;      ///< context parallel ranks: a rank holds t / cp tokens of each sequence
  double tokens;  ///< per micro-batch on a rank
  bool sp;
  double size;       ///< bytes of a compute-dtype element
  double ep;         ///< expert parallel ranks (NOTE [Expert parallelism])
  double expert_dp;  ///< an expert's replicas: dp x cp / ep
};

Shape shape_of(const JobConfig& c, const Layout& layout, const LayoutModel& lm);

}  // namespace vescale::autoplan
