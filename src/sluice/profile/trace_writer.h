// The profile's timeline as Chrome trace-event JSON, which Perfetto and
// chrome://tracing open: a track per thread (named after the node it works
// for) with a span per op and row tile, per node and element, and per
// consumer next(); counter tracks for throughput, the consumer's waiting
// and each node's buffered elements.
#ifndef SLUICE_PROFILE_TRACE_WRITER_H_
#define SLUICE_PROFILE_TRACE_WRITER_H_

#include <string>

#include "sluice/profile/profiler.h"

namespace sluice::profile {

std::string ChromeTraceJson(const ProfileResult& result);

}  // namespace sluice::profile

#endif  // SLUICE_PROFILE_TRACE_WRITER_H_
