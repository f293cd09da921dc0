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

// W5b is W3 with a horizontal flip and RandAugment(2, 9) before the
// normalization, which then mirrors nothing itself.
TEST(ShippedPipelines, W5bIsW3WithAFlipAndRandAugment) {
  ASSERT_OK_AND_ASSIGN(PipelineDef w3, PipelineFromJsonFile(Root() + "/pipelines/w3_imagenet.json"));
  ASSERT_OK_AND_ASSIGN(PipelineDef w5b, PipelineFromJsonFile(Root() + "/pipelines/w5b_imagenet.json"));
  ASSERT_EQ(w5b.nodes_size(), w3.nodes_size());
  ASSERT_EQ(w5b.nodes(1).map().ops_size(), 4);
  const OpDef& flip = w5b.nodes(1).map().ops(1);
  const OpDef& augment = w5b.nodes(1).map().ops(2);
  EXPECT_EQ(flip.op(), "random_flip");
  EXPECT_EQ(flip.attrs().fields().at("mode").string_value(), "horizontal");
  EXPECT_EQ(augment.op(), "rand_augment");
  EXPECT_EQ(augment.attrs().fields().at("num_ops").number_value(), 2);
  EXPECT_EQ(augment.attrs().fields().at("magnitude").number_value(), 9);
  EXPECT_EQ(w5b.nodes(1).map().ops(3).attrs().fields().at("mirror").number_value(), 0);
  w5b.mutable_nodes(1)->mutable_map()->mutable_ops()->DeleteSubrange(1, 2);
  (*w5b.mutable_nodes(1)->mutable_map()->mutable_ops(1)->mutable_attrs()->mutable_fields())["mirror"].set_number_value(
      0.5);
  w5b.set_name(w3.name());
  google::protobuf::util::MessageDifferencer diff;
  std::string report;
  diff.ReportDifferencesToString(&report);
  EXPECT_TRUE(diff.Compare(w3, w5b)) << report;
}

TEST(ShippedPipelines, TheServiceDemosAreTheWorkloadsOnOneLocalWorker) {
  ExpectOnOneLocalWorker("w2_service.json", "w2_cifar10.json");
  ExpectOnOneLocalWorker("w3_service.json", "w3_imagenet.json");
}

}  // namespace
}  // namespace sluice::bench
