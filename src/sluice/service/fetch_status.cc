#include "sluice/service/fetch_status.h"

#include "service.grpc.pb.h"
#include "sluice/core/status_macros.h"
#include "sluice/service/channel.h"
#include "sluice/service/unary_call.h"

namespace sluice::service {

absl::StatusOr<DispatcherStatus> FetchDispatcherStatus(const std::string& dispatcher, const SecurityOptions& security) {
  SLUICE_RETURN_IF_ERROR(CheckAddress(dispatcher));
  SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel, MakeChannel(dispatcher, security));
  auto stub = ::sluice::Dispatcher::NewStub(channel);
  DispatcherStatus status;
  SLUICE_RETURN_IF_ERROR(CallUnary(stub.get(), &::sluice::Dispatcher::Stub::GetStatus, "dispatcher " + dispatcher,
                                   GetStatusRequest(), &status, security.token));
  return status;
}

}  // namespace sluice::service
