// Builds the metric families one scrape serves: each metric added to its
// family by name, with this process's CPU time and resident memory. Used
// by the dispatcher's, the workers' and the pipelines' endpoints.
#ifndef SLUICE_SERVICE_METRIC_FAMILIES_H_
#define SLUICE_SERVICE_METRIC_FAMILIES_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "google/protobuf/map.h"
#include "prometheus/metric_family.h"

namespace sluice::service {

class MetricFamilies {
 public:
  using Labels = std::vector<prometheus::ClientMetric::Label>;

  void Gauge(const std::string& name, const std::string& help, Labels labels, double value);
  void Counter(const std::string& name, const std::string& help, Labels labels, double value);
  // A counter per kind that happened (a series Prometheus has not seen
  // reads as none yet).
  void Errors(const std::string& name, const std::string& help,
              const google::protobuf::Map<std::string, int64_t>& by_kind);
  // This process's CPU time and resident memory.
  void Process();
  std::vector<prometheus::MetricFamily> Take();

 private:
  prometheus::ClientMetric& Add(const std::string& name, const std::string& help, prometheus::MetricType type,
                                Labels labels);

  std::map<std::string, prometheus::MetricFamily> families_;
};

}  // namespace sluice::service

#endif  // SLUICE_SERVICE_METRIC_FAMILIES_H_
