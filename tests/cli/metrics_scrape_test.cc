#include "sluice/cli/metrics_scrape.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gtest/gtest.h"
#include "sluice/placement/pipeline_metrics.h"
#include "status_matchers.h"

namespace sluice::cli {
namespace {

TEST(ParseExposition, ReadsNamesLabelsWithEscapesAndValuesAndSkipsComments) {
  const std::vector<MetricSample> samples = ParseExposition(
      "# HELP sluice_pipelines live pipelines\n"
      "# TYPE sluice_pipelines gauge\n"
      "sluice_pipelines 2\n"
      "sluice_placement_info{pipeline=\"0\",placement=\"in the trainer's process\",chosen=\"a \\\"quoted\\\" "
      "one,\\\\ and\\nmore\"} 1\n"
      "sluice_pipeline_wait_seconds_total{pipeline=\"1\"} 0.25 1700000000\n"
      "not a sample\n"
      "\n");
  ASSERT_EQ(samples.size(), 3);
  EXPECT_EQ(samples[0].name, "sluice_pipelines");
  EXPECT_TRUE(samples[0].labels.empty());
  EXPECT_EQ(samples[0].value, 2);
  EXPECT_EQ(samples[1].labels.at("pipeline"), "0");
  EXPECT_EQ(samples[1].labels.at("placement"), "in the trainer's process");
  EXPECT_EQ(samples[1].labels.at("chosen"), "a \"quoted\" one,\\ and\nmore");
  EXPECT_EQ(samples[2].value, 0.25);  // the timestamp after it ignored
}

TEST(ScrapeMetrics, ReadsWhatAProcessServesAndNamesAnAddressWithNone) {
  absl::StatusOr<int> port = placement::ServePipelineMetrics("127.0.0.1", 0);
  ASSERT_TRUE(port.ok()) << port.status();
  absl::StatusOr<std::vector<MetricSample>> samples = ScrapeMetrics("127.0.0.1:" + std::to_string(*port));
  ASSERT_TRUE(samples.ok()) << samples.status();
  bool pipelines = false;
  for (const MetricSample& s : *samples) pipelines |= s.name == "sluice_pipelines" && s.value == 0;
  EXPECT_TRUE(pipelines);

  const absl::Status refused = ScrapeMetrics("127.0.0.1:1").status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(refused.message().find("http://127.0.0.1:1/metrics"), std::string::npos) << refused;
  EXPECT_EQ(ScrapeMetrics("no-port").status().code(), absl::StatusCode::kInvalidArgument);
}

// The web server took "999.1.1.1" as 231.1.1.1 and a comma-separated host
// as a list of places to listen, and said OK.
TEST(ServeMetrics, AHostThatIsNoOneAddressIsRefusedNotServedElsewhere) {
  for (const std::string host : {"999.1.1.1", "127.0.0.1:8123,127.0.0.2", "", "::zz"}) {
    const absl::Status served = placement::ServePipelineMetrics(host, 0).status();
    EXPECT_EQ(served.code(), absl::StatusCode::kInvalidArgument) << host << ": " << served;
    EXPECT_NE(served.message().find("cannot serve metrics on host '" + host + "'"), std::string::npos) << served;
  }
  SLUICE_EXPECT_OK(placement::ServePipelineMetrics("127.0.0.1", 0).status());
}

// A port that takes connections (the kernel's backlog) and never answers
// held `sluice status --process` 30 s.
TEST(ScrapeMetrics, AnAddressThatNeverAnswersIsGivenUpOnAfterFiveSeconds) {
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const std::string target = "127.0.0.1:" + std::to_string(ntohs(address.sin_port));
  const absl::Status silent = ScrapeMetrics(target).status();
  ::close(listener);
  EXPECT_EQ(silent.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(silent.message().find("http://" + target + "/metrics did not answer within 5 s"), std::string::npos)
      << silent;
}

}  // namespace
}  // namespace sluice::cli
