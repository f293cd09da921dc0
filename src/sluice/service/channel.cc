#include "sluice/service/channel.h"

#include "sluice/core/status_macros.h"

namespace sluice::service {

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(const std::string& target, const SecurityOptions& options) {
  SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> credentials, MakeChannelCredentials(options));
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  // Reconnect quickly after a dispatcher or worker restart.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  // Re-resolve soon after a failure (the default waits 30 s).
  args.SetInt(GRPC_ARG_DNS_MIN_TIME_BETWEEN_RESOLUTIONS_MS, 500);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 500);
  return grpc::CreateCustomChannel(target, credentials, args);
}

}  // namespace sluice::service
