// The profile as one JSON object (what `sluice profile --json` prints last
// and Python's pipeline.profile() returns as a dict).
#ifndef SLUICE_PROFILE_REPORT_JSON_H_
#define SLUICE_PROFILE_REPORT_JSON_H_

#include <string>

#include "sluice/profile/profiler.h"

namespace sluice::profile {

std::string JsonReport(const ProfileResult& result);

}  // namespace sluice::profile

#endif  // SLUICE_PROFILE_REPORT_JSON_H_
