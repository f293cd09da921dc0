#include "sluice/cli/metrics_scrape.h"

#include "gtest/gtest.h"
#include "sluice/placement/pipeline_metrics.h"

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

}  // namespace
}  // namespace sluice::cli
