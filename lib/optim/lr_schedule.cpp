#include "optim/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace vescale {

double lr_at(int64_t step, int64_t total, double peak, int64_t warmup, bool cosine,
             double min_ratio) {
  if (step < warmup) return peak * static_cast<double>(step + 1) / static_cast<double>(warmup);
  if (!cosine || total <= warmup) return peak;
  const double progress =
      std::min(1.0, static_cast<double>(step - warmup) / static_cast<double>(total - warmup));
  const double min_lr = peak * min_ratio;
  return min_lr + 0.5 * (peak - min_lr) * (1.0 + std::cos(M_PI * progress));
}

}  // namespace vescale
