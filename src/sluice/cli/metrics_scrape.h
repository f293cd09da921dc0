// One scrape of a Prometheus endpoint (a training process's
// `serve_metrics`, a worker's or dispatcher's --metrics-port): its samples
// by name and labels, for `sluice status --process`.
#ifndef SLUICE_CLI_METRICS_SCRAPE_H_
#define SLUICE_CLI_METRICS_SCRAPE_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sluice::cli {

struct MetricSample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// The samples of the text exposition format; comments and lines that are
// not a sample are skipped.
std::vector<MetricSample> ParseExposition(absl::string_view text);

// GET http://HOST:PORT/metrics. Unavailable naming the address when it
// cannot connect or answers other than 200.
absl::StatusOr<std::vector<MetricSample>> ScrapeMetrics(const std::string& host_port);

}  // namespace sluice::cli

#endif  // SLUICE_CLI_METRICS_SCRAPE_H_
