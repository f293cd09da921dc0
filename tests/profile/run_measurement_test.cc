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

// A throttled source delivers a chunk of 128 records every quarter of a
// second: a window of 0.4 s counted one chunk or three by where it fell
// (156 to 695 samples/s for 490). Timed over several chunks, it is close.
TEST(MeasureRunTest, ABurstySourceIsTimedOverSeveralBursts) {
  testing::TempDir dir;
  testing::WriteCifarTfRecords(dir.path(), 2048, 4);  // an epoch longer than any window (each starts a burst)
  PipelineDef def =
      PipelineBuilder::TfRecord({dir.Join("*.tfrecord")}, {BytesFeature("image", 3072), Int64Feature("label")}).Build();
  constexpr double kBytesPerS = 1.5e6;
  def.mutable_nodes(0)->mutable_source()->set_throttle_bytes_per_s(kBytesPerS);
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<exec::Pipeline> pipeline, exec::Pipeline::Create(def));
  MeasureOptions options;
  options.min_seconds = 0.4;
  ASSERT_OK_AND_ASSIGN(const RunMeasurement m, MeasureRun(*pipeline, options));
  const double rate = kBytesPerS / 3090;  // a record: the image, the label and the Example's framing
  EXPECT_GT(m.samples_per_s, 0.75 * rate);
  EXPECT_LT(m.samples_per_s, 1.25 * rate);
}

}  // namespace
}  // namespace sluice::profile
