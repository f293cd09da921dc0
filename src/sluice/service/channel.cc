#include "sluice/service/channel.h"

#include <netdb.h>

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/service/grpc_process.h"

namespace sluice::service {
namespace {

// A gRPC URI ("dns:///h:p", "xds:///svc", "unix:/path") rather than
// "host:port" or "[v6]:port".
bool HasScheme(const std::string& target) {
  if (absl::StrContains(target, "://")) return true;
  for (const char* scheme : {"dns:", "unix:", "unix-abstract:", "ipv4:", "ipv6:", "vsock:"}) {
    if (absl::StartsWith(target, scheme)) return true;
  }
  return false;
}

// The host and port of a plain "host:port" target; empty host when it has
// no port (gRPC would dial port 443 for it).
std::pair<std::string, std::string> HostAndPort(const std::string& target) {
  const size_t colon = target.rfind(':');
  if (colon == std::string::npos || colon + 1 == target.size()) return {"", ""};
  const std::string port = target.substr(colon + 1);
  if (!std::all_of(port.begin(), port.end(), absl::ascii_isdigit)) return {"", ""};
  std::string host = target.substr(0, colon);
  if (host.find(':') != std::string::npos) {  // IPv6: only in brackets
    if (host.size() < 2 || host.front() != '[' || host.back() != ']') return {"", ""};
    host = host.substr(1, host.size() - 2);
  }
  return {host, port};
}

}  // namespace

std::string WhyUnreachable(const std::string& target) {
  if (HasScheme(target)) return "";
  const std::string host = HostAndPort(target).first;
  addrinfo* found = nullptr;
  const int error = getaddrinfo(host.c_str(), nullptr, nullptr, &found);
  if (found != nullptr) freeaddrinfo(found);
  if (error == 0) return "";
  return absl::StrCat("its host '", host, error == EAI_AGAIN ? "' did not resolve now (" : "' does not resolve (",
                      gai_strerror(error), ")");
}

absl::Status CheckAddress(const std::string& target) {
  if (HasScheme(target)) return absl::OkStatus();
  const auto [host, port] = HostAndPort(target);
  if (!host.empty()) {
    // gRPC takes the port modulo 65536 (":70000" dials 4464).
    if (port.size() <= 5 && std::stoi(port) >= 1 && std::stoi(port) <= 65535) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("address '", target, "': port ", port, " is not in 1..65535"));
  }
  const size_t colon = target.rfind(':');
  const bool v6 = std::count(target.begin(), target.end(), ':') > 1 && target.front() != '[';
  if (!v6 && colon != std::string::npos && colon + 1 < target.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("address '", target, "': port '", target.substr(colon + 1), "' is not a number"));
  }
  const std::string example = v6 ? absl::StrCat("[", target, "]:50051") : absl::StrCat(target, ":50051");
  return absl::InvalidArgumentError(absl::StrCat("address '", target, "' is not host:port ('", example, "'?)"));
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(const std::string& target, const SecurityOptions& options) {
  SLUICE_RETURN_IF_ERROR(ClaimGrpcForThisProcess(absl::StrCat("connecting to ", target)));
  SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> credentials, MakeChannelCredentials(options));
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  // Reconnect quickly after a dispatcher or worker restart. gRPC gives
  // each connection attempt (TCP, TLS, HTTP/2's first frames) the minimum
  // backoff at least: at 100 ms, links of 50 ms round trip never connected.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 5000);
  // Re-resolve soon after a failure (the default waits 30 s).
  args.SetInt(GRPC_ARG_DNS_MIN_TIME_BETWEEN_RESOLUTIONS_MS, 500);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 500);
  return grpc::CreateCustomChannel(target, credentials, args);
}

}  // namespace sluice::service
