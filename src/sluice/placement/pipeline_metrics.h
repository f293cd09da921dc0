// Prometheus metrics of this process's pipelines, for a training job's
// own scrape: what each pipeline delivered and how long its consumer
// waited, the engine's bytes by kind, and where it runs with what
// placement "auto" decided and why (docs/placement.md, "Metrics", lists
// every name). Off until served: before that no pipeline times its
// consumer, so the hot path pays one flag's load.
#ifndef SLUICE_PLACEMENT_PIPELINE_METRICS_H_
#define SLUICE_PLACEMENT_PIPELINE_METRICS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "prometheus/metric_family.h"

namespace sluice::placement {

class PlacedPipeline;

// Serves http://HOST:PORT/metrics for the whole process, from now on; the
// port (`port` 0: any free one). Serving again answers the port already
// served when `port` is 0 or that port, else FailedPrecondition naming
// it; Unavailable naming the address when it cannot listen.
absl::StatusOr<int> ServePipelineMetrics(const std::string& host, int port);
bool PipelineMetricsServed();

// Adds a pipeline to what a scrape reports while it lives; its number in
// the process (the `pipeline` label), from 0.
int64_t RegisterForMetrics(const std::shared_ptr<const PlacedPipeline>& pipeline);

// What one scrape serves now: every live pipeline's families.
std::vector<prometheus::MetricFamily> CollectPipelineMetrics();

}  // namespace sluice::placement

#endif  // SLUICE_PLACEMENT_PIPELINE_METRICS_H_
