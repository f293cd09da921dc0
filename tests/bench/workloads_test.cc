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

std::string Root() { return std::getenv("SLUICE_SOURCE_DIR") ? std::getenv("SLUICE_SOURCE_DIR") : "."; }

// `service_file` is the pipeline of `plain_file` with its prefix on one
// local worker: a distribute node is all that differs.
void ExpectOnOneLocalWorker(const std::string& service_file, const std::string& plain_file) {
  ASSERT_OK_AND_ASSIGN(PipelineDef plain, PipelineFromJsonFile(Root() + "/pipelines/" + plain_file));
  ASSERT_OK_AND_ASSIGN(PipelineDef service, PipelineFromJsonFile(Root() + "/pipelines/" + service_file));
  ASSERT_OK_AND_ASSIGN(const int d, FindDistribute(service));
  EXPECT_EQ(service.nodes(d).distribute().local_workers(), 1);
  service.mutable_nodes()->DeleteSubrange(d, 1);
  service.set_name(plain.name());
  google::protobuf::util::MessageDifferencer diff;
  std::string report;
  diff.ReportDifferencesToString(&report);
  EXPECT_TRUE(diff.Compare(plain, service)) << service_file << ": " << report;
}

TEST(ShippedPipelines, EqualTheBenchWorkloads) {
  ASSERT_OK_AND_ASSIGN(PipelineDef w1, PipelineFromJsonFile(Root() + "/pipelines/w1_mnist.json"));
  ASSERT_OK_AND_ASSIGN(PipelineDef w2, PipelineFromJsonFile(Root() + "/pipelines/w2_cifar10.json"));
  ASSERT_OK_AND_ASSIGN(PipelineDef w5a, PipelineFromJsonFile(Root() + "/pipelines/w5a_cifar10.json"));
  google::protobuf::util::MessageDifferencer diff;
  std::string report;
  diff.ReportDifferencesToString(&report);
  diff.set_float_comparison(google::protobuf::util::MessageDifferencer::APPROXIMATE);
  EXPECT_TRUE(diff.Compare(W1Pipeline("data/mnist"), w1)) << report;
  EXPECT_TRUE(diff.Compare(W2Pipeline("data/cifar10"), w2)) << report;
  EXPECT_TRUE(diff.Compare(W5aPipeline("data/cifar10"), w5a)) << report;
}

TEST(ShippedPipelines, TheServiceDemosAreTheWorkloadsOnOneLocalWorker) {
  ExpectOnOneLocalWorker("w2_service.json", "w2_cifar10.json");
  ExpectOnOneLocalWorker("w3_service.json", "w3_imagenet.json");
}

}  // namespace
}  // namespace sluice::bench
