#include "sluice/service/autoscale.h"

#include <algorithm>
#include <cmath>

namespace sluice::service {

int WorkersNeeded(const JobLoad& load) {
  if (load.clients == 0) return 0;
  // No worker, or none measured yet: one to start with, or those it has.
  if (load.workers == 0) return 1;
  if (load.consumed_per_s <= 0) return load.workers;
  // Demand r / (1 - w) over r / n served per worker: the rate cancels.
  const double needed = load.workers / (1.0 - std::clamp(load.wait_share, 0.0, kMaxWaitShare));
  // A hair above an integer (rounding of the measured share) stays that integer.
  return std::max(1, static_cast<int>(std::ceil(needed - 1e-3)));
}

}  // namespace sluice::service
