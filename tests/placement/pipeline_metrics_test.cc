#include "sluice/placement/pipeline_metrics.h"

#include <cstring>
#include <map>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/placement/placed_pipeline.h"

namespace sluice::placement {
namespace {

using ::testing::HasSubstr;

// `rows` int64 ids from an arrays source, batched by `batch`.
PipelineDef IdsDef(int64_t rows, int64_t batch, const std::string& placement) {
  PipelineDef def;
  ArrayColumn* ids = def.add_nodes()->mutable_source()->mutable_arrays()->add_columns();
  ids->set_name("id");
  ids->set_dtype("int64");
  std::string data(static_cast<size_t>(rows) * sizeof(int64_t), '\0');
  for (int64_t i = 0; i < rows; ++i) std::memcpy(&data[static_cast<size_t>(i) * sizeof(int64_t)], &i, sizeof(i));
  ids->set_data(data);
  def.add_nodes()->mutable_batch()->set_size(batch);
  def.mutable_options()->set_threads(1);
  def.mutable_options()->set_placement(placement);
  return def;
}

// Each series' value by "name{label=value,...}" (labels in the order given).
std::map<std::string, double> Series() {
  std::map<std::string, double> out;
  for (const prometheus::MetricFamily& family : CollectPipelineMetrics()) {
    for (const prometheus::ClientMetric& m : family.metric) {
      std::string key = family.name;
      if (!m.label.empty()) {
        key += "{";
        for (size_t i = 0; i < m.label.size(); ++i) key += (i ? "," : "") + m.label[i].name + "=" + m.label[i].value;
        key += "}";
      }
      out[key] = family.type == prometheus::MetricType::Counter ? m.counter.value : m.gauge.value;
    }
  }
  return out;
}

int64_t Drain(PlacedPipeline& pipeline) {
  std::unique_ptr<PlacedIterator> it = pipeline.Iterate(0);
  int64_t elements = 0;
  while (true) {
    Batch batch;
    bool end = false;
    EXPECT_TRUE(it->Next(&batch, &end).ok());
    if (end) return elements;
    ++elements;
  }
}

// One test: serving is for the whole process, from the first call on.
TEST(PipelineMetrics, CountDeliveriesOnceServedAndReportEachLivePipelinesMemoryAndPlacement) {
  absl::StatusOr<std::shared_ptr<PlacedPipeline>> before = PlacedPipeline::Create(IdsDef(100, 10, "manual"));
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_EQ(Drain(**before), 10);
  EXPECT_EQ((*before)->delivered().samples, 0) << "nothing is timed before metrics are served";

  absl::StatusOr<int> port = ServePipelineMetrics("127.0.0.1", 0);
  ASSERT_TRUE(port.ok()) << port.status();
  EXPECT_GT(*port, 0);
  EXPECT_EQ(*ServePipelineMetrics("127.0.0.1", 0), *port);
  EXPECT_EQ(*ServePipelineMetrics("127.0.0.1", *port), *port);
  const absl::Status other = ServePipelineMetrics("127.0.0.1", *port + 1).status();
  EXPECT_EQ(other.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(other.message(), HasSubstr(std::to_string(*port)));

  absl::StatusOr<std::shared_ptr<PlacedPipeline>> manual = PlacedPipeline::Create(IdsDef(1000, 64, "manual"));
  absl::StatusOr<std::shared_ptr<PlacedPipeline>> automatic = PlacedPipeline::Create(IdsDef(500, 50, "auto"));
  ASSERT_TRUE(manual.ok() && automatic.ok());
  ASSERT_EQ(Drain(**manual), 16);
  ASSERT_EQ(Drain(**manual), 16);
  ASSERT_EQ(Drain(**automatic), 10);

  std::map<std::string, double> s = Series();
  const std::string m = "{pipeline=" + std::to_string((*manual)->number()) + "}";
  const std::string a = "{pipeline=" + std::to_string((*automatic)->number()) + "}";
  EXPECT_EQ(s["sluice_pipelines"], 3);
  EXPECT_EQ(s["sluice_pipeline_samples_total" + m], 2000);
  EXPECT_EQ(s["sluice_pipeline_elements_total" + m], 32);
  EXPECT_EQ(s["sluice_pipeline_samples_total" + a], 500);
  EXPECT_EQ(s["sluice_pipeline_elements_total" + a], 10);
  EXPECT_GT(s["sluice_pipeline_wait_seconds_total" + m], 0);

  const PlacedPipeline::Memory memory = (*manual)->memory();
  const std::string pipeline_m = "pipeline=" + std::to_string((*manual)->number());
  EXPECT_EQ(s["sluice_pipeline_engine_bytes{" + pipeline_m + ",kind=cached}"], memory.cached);
  EXPECT_EQ(s["sluice_pipeline_engine_bytes{" + pipeline_m + ",kind=in_use}"], memory.in_use);
  EXPECT_EQ(s["sluice_pipeline_memory_budget_bytes" + m], memory.budget);
  EXPECT_GT(memory.peak_in_use, 0);
  EXPECT_EQ(s["sluice_pipeline_engine_peak_in_use_bytes" + m], memory.peak_in_use);
  EXPECT_EQ(s.count("sluice_process_engine_bytes{kind=object_blocks}"), 1);

  const Report report = (*automatic)->report();
  EXPECT_EQ(s["sluice_placement_threads" + a], report.placement.threads);
  EXPECT_EQ(s["sluice_placement_local_workers" + a], 0);
  EXPECT_EQ(s["sluice_placement_service_workers" + a], 0);
  EXPECT_EQ(s["sluice_placement_decisions_total" + a], report.decisions.size());
  const std::string where = (*manual)->report().running.Describe();
  EXPECT_EQ(s["sluice_placement_info{" + pipeline_m + ",mode=manual,placement=" + where + ",chosen=" + where + "}"], 1);
  EXPECT_EQ(s.count("sluice_placement_decisions_total" + m), 0) << "a manual placement decides nothing";

  const std::string gone = "sluice_pipeline_samples_total" + m;
  manual->reset();
  s = Series();
  EXPECT_EQ(s.count(gone), 0) << "a pipeline that ended leaves the scrape";
  EXPECT_EQ(s["sluice_pipelines"], 2);
  EXPECT_GT(s["sluice_process_resident_bytes"], 0);
}

}  // namespace
}  // namespace sluice::placement
