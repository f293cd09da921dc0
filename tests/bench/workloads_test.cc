// The pipelines shipped in pipelines/ are the bench's workloads.
#include "workloads.h"

#include <cstdlib>

#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "sluice/graph/compiled_pipeline.h"
#include "sluice/graph/pipeline_json.h"
#include "status_matchers.h"

namespace sluice::bench {
namespace {

using graph::FindDistribute;
using graph::PipelineFromJsonFile;

TEST(ShippedPipelines, EqualTheBenchWorkloads) {
  const std::string root = std::getenv("SLUICE_SOURCE_DIR") ? std::getenv("SLUICE_SOURCE_DIR") : ".";
  ASSERT_OK_AND_ASSIGN(PipelineDef w1, PipelineFromJsonFile(root + "/pipelines/w1_mnist.json"));
  ASSERT_OK_AND_ASSIGN(PipelineDef w2, PipelineFromJsonFile(root + "/pipelines/w2_cifar10.json"));
  ASSERT_OK_AND_ASSIGN(PipelineDef w5a, PipelineFromJsonFile(root + "/pipelines/w5a_cifar10.json"));
  google::protobuf::util::MessageDifferencer diff;
  std::string report;
  diff.ReportDifferencesToString(&report);
  diff.set_float_comparison(google::protobuf::util::MessageDifferencer::APPROXIMATE);
  EXPECT_TRUE(diff.Compare(W1Pipeline("data/mnist"), w1)) << report;
  EXPECT_TRUE(diff.Compare(W2Pipeline("data/cifar10"), w2)) << report;
  EXPECT_TRUE(diff.Compare(W5aPipeline("data/cifar10"), w5a)) << report;
  // The service demo: W2 with its prefix on one local worker.
  ASSERT_OK_AND_ASSIGN(PipelineDef w2_service, PipelineFromJsonFile(root + "/pipelines/w2_service.json"));
  ASSERT_OK_AND_ASSIGN(const int d, FindDistribute(w2_service));
  EXPECT_EQ(w2_service.nodes(d).distribute().local_workers(), 1);
  w2_service.mutable_nodes()->DeleteSubrange(d, 1);
  w2_service.set_name(w2.name());
  EXPECT_TRUE(diff.Compare(w2, w2_service)) << report;
}

}  // namespace
}  // namespace sluice::bench
