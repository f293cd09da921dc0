// A plan over the limits is refused naming the node, what it would hold and
// the limit; one within them passes.
#include "sluice/graph/resource_limits.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/graph/compiled_pipeline.h"
#include "sluice/pipeline_builder.h"
#include "status_matchers.h"

namespace sluice::graph {
namespace {

using ::sluice::testing::StatusIs;
using ::testing::HasSubstr;

PipelineBuilder Rows() { return PipelineBuilder::Arrays({MakeArrayColumn("x", {1024}, std::vector<uint8_t>(4096))}); }

TEST(ResourceLimits, ABatchOverTheLimitNamesItsNodeAndBytes) {
  ASSERT_OK_AND_ASSIGN(const CompiledPipeline plan, Compile(Rows().Batch(100).Named("big").Build()));
  ResourceLimits limits;
  limits.max_batch_bytes = 50 * 1024;
  EXPECT_THAT(CheckResourceLimits(plan, limits), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("big")));
  limits.max_batch_bytes = 100 * 1024;
  SLUICE_EXPECT_OK(CheckResourceLimits(plan, limits));
}

TEST(ResourceLimits, AShuffleBufferOverTheLimitIsRefused) {
  ASSERT_OK_AND_ASSIGN(const CompiledPipeline plan, Compile(Rows().Shuffle(2000).Named("shuffled").Build()));
  ResourceLimits limits;
  limits.max_buffer_bytes = 1 << 20;
  EXPECT_THAT(CheckResourceLimits(plan, limits), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("shuffled")));
}

TEST(ResourceLimits, TooManyThreadsAreRefused) {
  ASSERT_OK_AND_ASSIGN(const CompiledPipeline plan, Compile(Rows().Threads(64).Build()));
  ResourceLimits limits;
  limits.max_threads = 16;
  EXPECT_THAT(CheckResourceLimits(plan, limits), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("16")));
}

}  // namespace
}  // namespace sluice::graph
