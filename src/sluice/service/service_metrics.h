// What the dispatcher and workers serve on --metrics-port, built from the
// status they report (docs/service.md, "Metrics", lists every name and
// label). Rates are the last heartbeat's; totals count since the process
// started.
#ifndef SLUICE_SERVICE_SERVICE_METRICS_H_
#define SLUICE_SERVICE_SERVICE_METRICS_H_

#include <vector>

#include "prometheus/metric_family.h"
#include "service.pb.h"

namespace sluice::service {

std::vector<prometheus::MetricFamily> DispatcherMetrics(const DispatcherStatus& status);
std::vector<prometheus::MetricFamily> WorkerMetrics(const WorkerStatus& status);

}  // namespace sluice::service

#endif  // SLUICE_SERVICE_SERVICE_METRICS_H_
