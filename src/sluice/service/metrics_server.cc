#include "sluice/service/metrics_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>

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

namespace {

// That `host` is one address or host name: the web server takes a list
// ("a:1,b:2") and wraps a dotted quad past 255 ("999.1.1.1" listened on
// 231.1.1.1), both served as if asked for.
absl::Status CheckHost(const std::string& host) {
  const auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("cannot serve metrics on host '", host, "': ", why));
  };
  if (host.empty()) return bad("it is empty");
  if (host.find_first_of(", \t") != std::string::npos) return bad("one address or host name, no list");
  in_addr v4;
  in6_addr v6;
  const std::string bare = host.front() == '[' && host.back() == ']' ? host.substr(1, host.size() - 2) : host;
  if (bare.find(':') != std::string::npos) {
    return inet_pton(AF_INET6, bare.c_str(), &v6) == 1 ? absl::OkStatus() : bad("not an IPv6 address");
  }
  const bool dotted = host.find_first_not_of("0123456789.") == std::string::npos;
  if (dotted && inet_pton(AF_INET, host.c_str(), &v4) != 1) return bad("not an IPv4 address");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& host, int port,
                                                                    CollectFn collect) {
  if (absl::Status checked = CheckHost(host); !checked.ok()) return checked;
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
