#include "sluice/service/job_consumers.h"

#include <map>

#include "absl/synchronization/mutex.h"

namespace sluice::service {
namespace {

struct Consumers {
  absl::Mutex mu;
  std::map<std::string, int> by_job ABSL_GUARDED_BY(mu);
};

Consumers& Registry() {
  static auto* registry = new Consumers();  // never destroyed: pipelines may outlive static destruction
  return *registry;
}

}  // namespace

std::shared_ptr<void> CountJobConsumer(const std::string& job, int* others) {
  Consumers& r = Registry();
  {
    absl::MutexLock lock(&r.mu);
    *others = r.by_job[job]++;
  }
  return std::shared_ptr<void>(nullptr, [job](void*) {
    Consumers& r = Registry();
    absl::MutexLock lock(&r.mu);
    if (--r.by_job[job] == 0) r.by_job.erase(job);
  });
}

}  // namespace sluice::service
