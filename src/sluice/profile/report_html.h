// The profile as a self-contained HTML page (inline SVG, no scripts): the
// verdict, the levers, throughput over time, where the CPU goes, the nodes'
// time and the autotuner's setting.
#ifndef SLUICE_PROFILE_REPORT_HTML_H_
#define SLUICE_PROFILE_REPORT_HTML_H_

#include <string>

#include "sluice/profile/profiler.h"

namespace sluice::profile {

std::string HtmlReport(const ProfileResult& result);

}  // namespace sluice::profile

#endif  // SLUICE_PROFILE_REPORT_HTML_H_
