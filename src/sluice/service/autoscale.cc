#include "sluice/service/autoscale.h"

#include <algorithm>
#include <cmath>

namespace sluice::service {

int WorkersNeeded(const JobLoad& load) {
  if (load.clients == 0) return 0;
  // No worker, or none measured yet: one to start with, or those it has.
  if (load.workers == 0) return 1;
  if (load.consumed_per_s <= 0) return load.workers;
  const double per_worker = load.consumed_per_s / load.workers;
  const double demand = load.consumed_per_s / (1.0 - std::clamp(load.wait_share, 0.0, kMaxWaitShare));
  // A hair below an integer (rounding of the rates) stays that integer.
  return std::max(1, static_cast<int>(std::ceil(demand / per_worker - 1e-3)));
}

}  // namespace sluice::service
