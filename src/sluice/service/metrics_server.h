// A Prometheus scrape endpoint, http://HOST:PORT/metrics, in the text
// exposition format. It serves what `collect` returns at each scrape, so
// figures are as fresh as the scrape and series of jobs that ended vanish
// with them. prometheus-cpp's pull library (civetweb inside) speaks HTTP
// and the format: kept libraries, not a hand-written server.
#ifndef SLUICE_SERVICE_METRICS_SERVER_H_
#define SLUICE_SERVICE_METRICS_SERVER_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "prometheus/metric_family.h"

namespace prometheus {
class Exposer;
}

namespace sluice::service {

class MetricsServer {
 public:
  using CollectFn = std::function<std::vector<prometheus::MetricFamily>()>;

  // `port` 0: any free port (see port()). Unavailable naming the address
  // when it cannot listen.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(const std::string& host, int port, CollectFn collect);
  ~MetricsServer();

  int port() const { return port_; }

 private:
  class Collector;
  MetricsServer() = default;

  std::shared_ptr<Collector> collector_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
};

}  // namespace sluice::service

#endif  // SLUICE_SERVICE_METRICS_SERVER_H_
