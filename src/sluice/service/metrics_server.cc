#include "sluice/service/metrics_server.h"

#include <exception>

#include "absl/strings/str_cat.h"
#include "prometheus/collectable.h"
#include "prometheus/exposer.h"

namespace sluice::service {

class MetricsServer::Collector : public prometheus::Collectable {
 public:
  explicit Collector(CollectFn collect) : collect_(std::move(collect)) {}
  std::vector<prometheus::MetricFamily> Collect() const override { return collect_(); }

 private:
  const CollectFn collect_;
};

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& host, int port,
                                                                    CollectFn collect) {
  std::unique_ptr<MetricsServer> server(new MetricsServer());
  const std::string address = absl::StrCat(host, ":", port);
  try {  // prometheus-cpp reports a failed bind by throwing
    server->exposer_ = std::make_unique<prometheus::Exposer>(address, /*num_threads=*/1);
  } catch (const std::exception&) {  // its text names its web server's internals, not the cause
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", address,
                                               " (is another process listening there, or is the "
                                               "address not this machine's?)"));
  }
  server->collector_ = std::make_shared<Collector>(std::move(collect));
  server->exposer_->RegisterCollectable(server->collector_);
  const std::vector<int> ports = server->exposer_->GetListeningPorts();
  server->port_ = ports.empty() ? port : ports.front();
  return server;
}

MetricsServer::~MetricsServer() {
  if (exposer_) exposer_->RemoveCollectable(collector_);
}

}  // namespace sluice::service
