// Channels between sluice's processes: the message-size limits both sides
// set, and the reconnect timing that lets a client see a restarted
// dispatcher or worker within a second.
#ifndef SLUICE_SERVICE_CHANNEL_H_
#define SLUICE_SERVICE_CHANNEL_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "sluice/service/security.h"

namespace sluice::service {

// A channel to `target` with sluice's message-size limits.
absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(const std::string& target, const SecurityOptions& options);
// InvalidArgument for an address a user gave that is neither host:port
// nor a gRPC URI (gRPC would dial port 443 for "host").
absl::Status CheckAddress(const std::string& target);
// Why `target` cannot be reached that can be told without it ("its host
// 'x' does not resolve ..."); empty when nothing is known.
std::string WhyUnreachable(const std::string& target);
// The largest message a sluice process accepts: a batch; larger ones are
// rejected by gRPC with RESOURCE_EXHAUSTED naming the sizes.
inline constexpr int kMaxMessageBytes = 1 << 30;
// The largest request the dispatcher accepts (a pipeline definition; arrays
// sources carry their data inside it).
inline constexpr int kMaxRequestBytes = 64 << 20;

}  // namespace sluice::service

#endif  // SLUICE_SERVICE_CHANNEL_H_
