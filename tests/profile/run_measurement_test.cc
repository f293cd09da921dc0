#include "sluice/profile/run_measurement.h"

#include <atomic>
#include <chrono>
#include <thread>

#include "gtest/gtest.h"
#include "sluice/exec/pipeline.h"
#include "sluice/ops/op_registry.h"
#include "sluice/pipeline_builder.h"
#include "status_matchers.h"
#include "temp_dir.h"
#include "test_data.h"

namespace sluice::profile {
namespace {

// Ctrl-C during a profile: the run returns at its next element, and its
// sampler, sampling all along, must not read the epoch's iterator once it
// is gone (it did: a segmentation fault now and then).
TEST(MeasureRunTest, ACancelledRunLeavesNothingReadingItsIterator) {
  testing::TempDir dir;
  testing::WriteCifarTfRecords(dir.path(), 256, 4);
  const PipelineDef def =
      PipelineBuilder::TfRecord({dir.Join("*.tfrecord")}, {BytesFeature("image", 3072), Int64Feature("label")})
          .Map({Op("reshape", {{"shape", {32, 32, 3}}}), Op("rescale", {{"scale", 1 / 255.0}})})
          .Batch(16)
          .Build();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<exec::Pipeline> pipeline, exec::Pipeline::Create(def));
  MeasureOptions options;
  options.min_seconds = 60;          // ends by the cancel
  options.sample_interval_s = 1e-6;  // the sampler reads the iterator all the time
  for (int i = 0; i < 60; ++i) {
    std::atomic<bool> cancelled{false};
    options.cancelled = &cancelled;
    std::thread interrupt([&cancelled, i] {  // at a different point of the run each time
      std::this_thread::sleep_for(std::chrono::milliseconds(i % 20));
      cancelled = true;
    });
    const absl::StatusOr<RunMeasurement> m = MeasureRun(*pipeline, options);
    interrupt.join();
    ASSERT_TRUE(absl::IsCancelled(m.status())) << m.status();
  }
}

}  // namespace
}  // namespace sluice::profile
