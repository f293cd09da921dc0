// Samples for end-to-end service tests: each carries its id, so a test
// checks which samples arrived how often, and an image the workers flip at
// random, so it checks that each got its own draws.
#ifndef SLUICE_TESTS_SERVICE_SERVICE_SAMPLES_H_
#define SLUICE_TESTS_SERVICE_SERVICE_SAMPLES_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sluice/exec/pipeline.h"
#include "sluice/pipeline_builder.h"
#include "test_cluster.h"

namespace sluice::service {

constexpr int kRows = 20000;  // 200 splits of 100
constexpr int kPixels = 16 * 16 * 3;

// The samples, mapped by the workers' part.
PipelineBuilder Samples();

// Options reaching `dispatcher`, waiting for it 5 s at most.
DistributeOptions DistributeTo(const std::string& dispatcher);
// Samples() through a distribute node, then batched by 64.
PipelineDef Distributed(const std::string& dispatcher, const std::string& mode = "distributed_epoch",
                        const std::string& job = "", const std::string& compression = "");

struct Received {
  std::map<int64_t, int> count;  // by id
  std::vector<std::vector<uint8_t>> images_by_id = std::vector<std::vector<uint8_t>>(kRows);
  int batches = 0;
  int64_t skipped = 0;  // records, under on_corrupt "skip"
};

// Adds the elements of `it` to `out` until its end, or until `stop_at`
// batches have arrived in all; calls `after(k)` once k batches have arrived.
absl::Status ReadInto(exec::PipelineIterator* it, Received* out, int stop_at = -1, int at = -1,
                      const std::function<void()>& after = nullptr);
// Reads epoch `epoch`; calls `after()` once `at` batches have arrived.
absl::StatusOr<Received> ReadEpoch(const exec::Pipeline& pipeline, uint64_t epoch = 0, int at = -1,
                                   const std::function<void()>& after = nullptr);

void ExpectEachIdTimes(const Received& r, int times);

// Starts `cluster`'s dispatcher and `workers` one-thread workers.
absl::Status StartCluster(testing::TestCluster& cluster, int workers);

}  // namespace sluice::service

#endif  // SLUICE_TESTS_SERVICE_SERVICE_SAMPLES_H_
