#include "service_samples.h"

#include "gtest/gtest.h"
#include "sluice/core/status_macros.h"

namespace sluice::service {

PipelineBuilder Samples() {
  std::vector<int64_t> ids(kRows);
  std::vector<uint8_t> images(static_cast<size_t>(kRows) * kPixels);
  for (int i = 0; i < kRows; ++i) {
    ids[i] = i;
    for (int p = 0; p < kPixels; ++p) images[static_cast<size_t>(i) * kPixels + p] = static_cast<uint8_t>(i + p);
  }
  PipelineBuilder b =
      PipelineBuilder::Arrays({MakeArrayColumn("id", {}, ids), MakeArrayColumn("image", {16, 16, 3}, images)});
  b.SplitRecords(100).Map({Op("random_flip")}).Seed(7);
  return b;
}

DistributeOptions DistributeTo(const std::string& dispatcher) {
  DistributeOptions d;
  d.dispatcher = dispatcher;
  d.connect_timeout_s = 5;
  return d;
}

PipelineDef Distributed(const std::string& dispatcher, const std::string& mode, const std::string& job,
                        const std::string& compression) {
  DistributeOptions d = DistributeTo(dispatcher);
  d.mode = mode;
  d.job_name = job;
  d.compression = compression;
  return Samples().Distribute(d).Batch(64).Build();
}

absl::Status ReadInto(exec::PipelineIterator* it, Received* out, int stop_at, int at,
                      const std::function<void()>& after) {
  while (out->batches != stop_at) {
    Batch b;
    bool end = false;
    SLUICE_RETURN_IF_ERROR(it->Next(&b, &end));
    if (end) {
      out->skipped += it->skipped().skipped();
      return absl::OkStatus();
    }
    const int64_t* ids = b.columns[0].values.data<int64_t>();
    for (int64_t r = 0; r < b.rows; ++r) {
      ++out->count[ids[r]];
      const uint8_t* img = b.columns[1].values.data<uint8_t>() + r * kPixels;
      out->images_by_id[ids[r]].assign(img, img + kPixels);
    }
    if (++out->batches == at && after) after();
  }
  return absl::OkStatus();
}

absl::StatusOr<Received> ReadEpoch(const exec::Pipeline& pipeline, uint64_t epoch, int at,
                                   const std::function<void()>& after) {
  Received out;
  SLUICE_RETURN_IF_ERROR(ReadInto(pipeline.Iterate(epoch).get(), &out, -1, at, after));
  return out;
}

void ExpectEachIdTimes(const Received& r, int times) {
  ASSERT_EQ(r.count.size(), static_cast<size_t>(kRows));
  int wrong = 0;
  for (const auto& [id, n] : r.count) wrong += n != times;
  EXPECT_EQ(wrong, 0) << "ids not delivered exactly " << times << " time(s)";
}

absl::Status StartCluster(testing::TestCluster& cluster, int workers) {
  SLUICE_RETURN_IF_ERROR(cluster.StartDispatcher());
  for (int i = 0; i < workers; ++i) SLUICE_RETURN_IF_ERROR(cluster.AddWorker());
  return absl::OkStatus();
}

}  // namespace sluice::service
