#include "sluice/cli/metrics_scrape.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "civetweb.h"

namespace sluice::cli {
namespace {

// A label value up to its closing quote, unescaping \\, \" and \n; the
// position after the quote, or npos when it does not close.
size_t ReadQuoted(absl::string_view line, size_t at, std::string* value) {
  for (; at < line.size(); ++at) {
    const char c = line[at];
    if (c == '"') return at + 1;
    if (c == '\\' && at + 1 < line.size()) {
      const char next = line[++at];
      value->push_back(next == 'n' ? '\n' : next);
    } else {
      value->push_back(c);
    }
  }
  return absl::string_view::npos;
}

// `k="v",...}` from `at` (just past '{'); the position after '}'.
size_t ReadLabels(absl::string_view line, size_t at, std::map<std::string, std::string>* labels) {
  while (at < line.size() && line[at] != '}') {
    const size_t eq = line.find("=\"", at);
    if (eq == absl::string_view::npos) return eq;
    std::string value;
    const size_t end = ReadQuoted(line, eq + 2, &value);
    if (end == absl::string_view::npos) return end;
    (*labels)[std::string(line.substr(at, eq - at))] = std::move(value);
    at = end < line.size() && line[end] == ',' ? end + 1 : end;
  }
  return at < line.size() ? at + 1 : absl::string_view::npos;
}

bool ParseSample(absl::string_view line, MetricSample* sample) {
  if (line.empty() || line[0] == '#') return false;
  size_t at = line.find_first_of("{ ");
  if (at == absl::string_view::npos) return false;
  sample->name = std::string(line.substr(0, at));
  if (line[at] == '{') at = ReadLabels(line, at + 1, &sample->labels);
  if (at == absl::string_view::npos) return false;
  const std::vector<absl::string_view> rest = absl::StrSplit(line.substr(at), ' ', absl::SkipEmpty());
  return !rest.empty() && absl::SimpleAtod(rest[0], &sample->value);
}

}  // namespace

std::vector<MetricSample> ParseExposition(absl::string_view text) {
  std::vector<MetricSample> samples;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    MetricSample sample;
    if (ParseSample(line, &sample)) samples.push_back(std::move(sample));
  }
  return samples;
}

absl::StatusOr<std::vector<MetricSample>> ScrapeMetrics(const std::string& host_port) {
  const std::vector<std::string> parts = absl::StrSplit(host_port, absl::MaxSplits(':', 1));
  int port = 0;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &port)) {
    return absl::InvalidArgumentError(absl::StrCat("'", host_port, "' is not HOST:PORT"));
  }
  mg_init_library(0);  // counted: once per call is safe
  char error[256] = "";
  mg_connection* conn = mg_connect_client(parts[0].c_str(), port, 0, error, sizeof(error));
  if (conn == nullptr) {
    return absl::UnavailableError(absl::StrCat("no metrics at http://", host_port, "/metrics: ", error));
  }
  const std::string url = absl::StrCat("http://", host_port, "/metrics");
  mg_printf(conn, "GET /metrics HTTP/1.0\r\nHost: %s\r\n\r\n", host_port.c_str());
  // A port that takes the connection and never answers held the command
  // 30 s. (civetweb's client times the response's head only.)
  constexpr int kAnswerMs = 5000;
  const absl::Time asked = absl::Now();
  if (mg_get_response(conn, error, sizeof(error), kAnswerMs) < 0) {
    mg_close_connection(conn);
    const std::string why = error[0] != '\0' ? absl::StrCat(": ", error) : "";
    if (absl::Now() - asked < absl::Milliseconds(kAnswerMs)) {
      return absl::UnavailableError(absl::StrCat(url, " did not answer as an HTTP server", why));
    }
    return absl::UnavailableError(absl::StrCat(url, " did not answer within ", kAnswerMs / 1000, " s", why));
  }
  const mg_response_info* info = mg_get_response_info(conn);
  const int code = info != nullptr ? info->status_code : 0;
  const int64_t announced = info != nullptr ? info->content_length : -1;
  std::string body;
  char buffer[16384];
  for (int n; (n = mg_read(conn, buffer, sizeof(buffer))) > 0;) body.append(buffer, static_cast<size_t>(n));
  mg_close_connection(conn);
  if (code != 200) return absl::UnavailableError(absl::StrCat(url, " answered ", code));
  if (announced >= 0 && static_cast<int64_t>(body.size()) != announced) {
    return absl::UnavailableError(
        absl::StrCat(url, " sent ", body.size(), " bytes of the ", announced, " its answer announced"));
  }
  return ParseExposition(body);
}

}  // namespace sluice::cli
