// The autoscaling signal: how many workers a job needs so that its
// consumers do not wait for data. What its consumers take per second is
// what its workers serve; a consumer that waits a share w of its time would
// take 1 / (1 - w) times as much. Each worker serves the job's rate divided
// by its workers. Workers that serve several jobs count fully for each, so
// the figure errs high there; a job whose consumers never wait needs the
// workers it has (the signal does not scale down: an autoscaler's minimum
// and cool-down do).
#ifndef SLUICE_SERVICE_AUTOSCALE_H_
#define SLUICE_SERVICE_AUTOSCALE_H_

#include <cstdint>

namespace sluice::service {

struct JobLoad {
  double consumed_per_s = 0;  // all its consumers, samples
  double wait_share = 0;      // the consumers' mean, 0 to 1
  int workers = 0;            // live workers that run its pipeline
  int clients = 0;
};

// Waits past kMaxWaitShare count as it: a consumer that only waits says the
// job needs more workers, not how many.
constexpr double kMaxWaitShare = 0.95;

int WorkersNeeded(const JobLoad& load);

}  // namespace sluice::service

#endif  // SLUICE_SERVICE_AUTOSCALE_H_
