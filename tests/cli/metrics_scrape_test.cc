#include "sluice/cli/metrics_scrape.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

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

// A socket listening on a free port of 127.0.0.1; its "HOST:PORT" in `target`.
int Listening(std::string* target) {
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  EXPECT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  EXPECT_EQ(::listen(listener, 4), 0);
  EXPECT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length), 0);
  *target = "127.0.0.1:" + std::to_string(ntohs(address.sin_port));
  return listener;
}

// A server on a free port of 127.0.0.1 that answers its one connection
// with `reply`, whatever was asked, and closes it.
class AnswersOnce {
 public:
  explicit AnswersOnce(std::string reply) : listener_(Listening(&target_)) {
    thread_ = std::thread([this, reply = std::move(reply)] {
      const int conn = ::accept(listener_, nullptr, nullptr);
      if (conn < 0) return;
      char request[4096];
      (void)::recv(conn, request, sizeof(request), 0);
      (void)::send(conn, reply.data(), reply.size(), MSG_NOSIGNAL);
      ::close(conn);
    });
  }
  ~AnswersOnce() {
    thread_.join();
    ::close(listener_);
  }
  const std::string& target() const { return target_; }

 private:
  std::string target_;  // before listener_, which sets it
  const int listener_;
  std::thread thread_;
};

TEST(ScrapeMetrics, AnAnswerCutShortOfItsLengthIsAnErrorNotTheMetricsItHas) {
  AnswersOnce server("HTTP/1.0 200 OK\r\nContent-Length: 100\r\n\r\nsluice_pipelines 0\n");
  const absl::Status cut = ScrapeMetrics(server.target()).status();
  EXPECT_EQ(cut.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(cut.message().find("http://" + server.target() + "/metrics sent 19 bytes of the 100 its answer announced"),
            std::string::npos)
      << cut;
}

TEST(ScrapeMetrics, AServerThatIsNotHttpIsNamedSoNotAsSilent) {
  AnswersOnce server("SSH-2.0-OpenSSH_9.2\r\n");
  const absl::Status other = ScrapeMetrics(server.target()).status();
  EXPECT_EQ(other.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(other.message().find("/metrics did not answer as an HTTP server"), std::string::npos) << other;
}

// A port that takes connections (the kernel's backlog) and never answers
// held `sluice status --process` 30 s.
TEST(ScrapeMetrics, AnAddressThatNeverAnswersIsGivenUpOnAfterFiveSeconds) {
  std::string target;
  const int listener = Listening(&target);
  ASSERT_GE(listener, 0);
  const absl::Status silent = ScrapeMetrics(target).status();
  ::close(listener);
  EXPECT_EQ(silent.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(silent.message().find("http://" + target + "/metrics did not answer within 5 s"), std::string::npos)
      << silent;
}

}  // namespace
}  // namespace sluice::cli
