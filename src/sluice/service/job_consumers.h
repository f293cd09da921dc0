// The consumers of each named job in this process: a second one of the
// same job is most often a notebook cell run again while an earlier
// cell's iterator still lives, which holds its share of every epoch.
#ifndef SLUICE_SERVICE_JOB_CONSUMERS_H_
#define SLUICE_SERVICE_JOB_CONSUMERS_H_

#include <memory>
#include <string>

namespace sluice::service {

// Counts a consumer of `job` (the dispatcher's address and the job's id)
// for as long as the returned handle lives; `*others` is how many this
// process held before it.
std::shared_ptr<void> CountJobConsumer(const std::string& job, int* others);

}  // namespace sluice::service

#endif  // SLUICE_SERVICE_JOB_CONSUMERS_H_
