#include "sluice/profile/trace_writer.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace sluice::profile {
namespace {

constexpr int kPid = 1;

std::string Quoted(const std::string& s) { return nlohmann::json(s).dump(); }

}  // namespace

std::string ChromeTraceJson(const ProfileResult& result) {
  const RunMeasurement& full = result.full;
  int64_t zero = full.start_ns;
  for (const exec::TraceSpan& s : result.spans) zero = std::min(zero, s.start_ns);
  const double series_offset_us = (full.start_ns - zero) * 1e-3;

  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  absl::StrAppend(&out, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":", kPid,
                  ",\"args\":{\"name\":", Quoted(absl::StrCat("sluice: ", result.findings.pipeline)), "}}");
  for (const auto& [tid, name] : full.thread_names) {
    absl::StrAppend(&out, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":", kPid, ",\"tid\":", tid,
                    ",\"args\":{\"name\":", Quoted(name), "}}");
  }
  std::map<std::string, std::string> quoted;  // names repeat: escape each once
  for (const exec::TraceSpan& s : result.spans) {
    auto it = quoted.find(s.name);
    if (it == quoted.end()) it = quoted.emplace(s.name, Quoted(s.name)).first;
    absl::StrAppendFormat(
        &out, ",\n{\"ph\":\"X\",\"cat\":\"%s\",\"name\":%s,\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f}", s.category,
        it->second, kPid, s.thread, (s.start_ns - zero) * 1e-3, (s.end_ns - s.start_ns) * 1e-3);
  }
  for (const Series& series : full.series) {
    const std::string name = Quoted(series.name);
    for (const auto& [t, v] : series.points) {
      absl::StrAppendFormat(&out, ",\n{\"ph\":\"C\",\"name\":%s,\"pid\":%d,\"ts\":%.3f,\"args\":{\"value\":%.6g}}",
                            name, kPid, t * 1e6 + series_offset_us, v);
    }
  }
  absl::StrAppend(&out, "\n],\"otherData\":{\"dropped_spans\":", result.dropped_spans, "}}\n");
  return out;
}

}  // namespace sluice::profile
