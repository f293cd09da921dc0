// What a dispatcher reports about itself (GetStatus), for `sluice status`
// and tools: what the caller's token may see.
#ifndef SLUICE_SERVICE_FETCH_STATUS_H_
#define SLUICE_SERVICE_FETCH_STATUS_H_

#include <string>

#include "absl/status/statusor.h"
#include "service.pb.h"
#include "sluice/service/security.h"

namespace sluice::service {

absl::StatusOr<DispatcherStatus> FetchDispatcherStatus(const std::string& dispatcher, const SecurityOptions& security);

}  // namespace sluice::service

#endif  // SLUICE_SERVICE_FETCH_STATUS_H_
