#include "sluice/service/fetch_status.h"

#include <chrono>

#include "service.grpc.pb.h"
#include "sluice/core/status_macros.h"

namespace sluice::service {

absl::StatusOr<DispatcherStatus> FetchDispatcherStatus(const std::string& dispatcher,
                                                       const SecurityOptions& security) {
  SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel, MakeChannel(dispatcher, security));
  auto stub = ::sluice::Dispatcher::NewStub(channel);
  grpc::ClientContext context;
  AddToken(&context, security.token);
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  DispatcherStatus status;
  SLUICE_RETURN_IF_ERROR(
      FromGrpc(stub->GetStatus(&context, GetStatusRequest(), &status), "dispatcher " + dispatcher));
  return status;
}

}  // namespace sluice::service
