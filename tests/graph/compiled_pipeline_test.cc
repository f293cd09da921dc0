#include "sluice/graph/compiled_pipeline.h"

#include <sched.h>

#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "sluice/core/usable_cores.h"
#include "sluice/graph/pipeline_json.h"
#include "sluice/ops/builtin_ops.h"
#include "sluice/ops/geometry_params.h"
#include "sluice/pipeline_builder.h"
#include "status_matchers.h"
#include "temp_dir.h"
#include "test_data.h"
#include "test_ops.h"

namespace sluice::graph {
namespace {

using ::sluice::testing::StatusIs;
using ::testing::HasSubstr;

class CompileTest : public ::testing::Test {
 protected:
  void SetUp() override { testing::WriteCifarTfRecords(dir_.path(), 10, 2); }

  PipelineBuilder Cifar() {
    return PipelineBuilder::TfRecord({dir_.Join("*.tfrecord")}, {BytesFeature("image", 3072), Int64Feature("label")});
  }

  testing::TempDir dir_;
};

TEST_F(CompileTest, ParsesFeaturesInTheFirstMapAndTracksTheSchema) {
  ASSERT_OK_AND_ASSIGN(
      CompiledPipeline c,
      Compile(
          Cifar().Map({Op("reshape", {{"shape", {32, 32, 3}}}), Op("rescale", {{"scale", 0.5}})}).Batch(4).Build()));
  ASSERT_EQ(c.nodes.size(), 3u);
  EXPECT_EQ(c.nodes[1].ops.front().name, "parse_example");
  EXPECT_EQ(c.output_schema().ToString(), "{image: float32[32,32,3], label: int64[]}");
  EXPECT_TRUE(c.batched());
}

TEST_F(CompileTest, DefaultThreadsAreTheCoresThisProcessMayRunOn) {
  cpu_set_t all;
  ASSERT_EQ(sched_getaffinity(0, sizeof(all), &all), 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &all)) {
      CPU_SET(cpu, &one);
      break;
    }
  }
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);  // as `taskset -c N` or a container's cpuset
  absl::StatusOr<CompiledPipeline> c = Compile(Cifar().Batch(4).Build());
  const int usable = UsableCores();
  ASSERT_EQ(sched_setaffinity(0, sizeof(all), &all), 0);
  SLUICE_ASSERT_OK(c.status());
  EXPECT_EQ(usable, 1);
  EXPECT_EQ(c->threads, 1);
  EXPECT_EQ(UsableCores(), CPU_COUNT(&all));
}

TEST_F(CompileTest, FusesConsecutiveWarps) {
  ASSERT_OK_AND_ASSIGN(CompiledPipeline c, Compile(Cifar()
                                                       .Map({Op("reshape", {{"shape", {32, 32, 3}}}), Op("random_flip"),
                                                             Op("random_rotation", {{"degrees", 10.0}}),
                                                             Op("random_zoom", {{"scale", {0.9, 1.1}}})})
                                                       .Build()));
  const std::vector<BoundOp>& ops = c.nodes[1].ops;
  ASSERT_EQ(ops.size(), 3u);  // parse, reshape, fused warp
  EXPECT_EQ(ops.back().name, "fused(random_flip+random_rotation+random_zoom)");
}

TEST_F(CompileTest, FoldsALayoutChangeIntoTheWarpBeforeIt) {
  ASSERT_OK_AND_ASSIGN(
      CompiledPipeline c,
      Compile(Cifar()
                  .Map({Op("reshape", {{"shape", {32, 32, 3}}}), Op("rescale", {{"scale", 0.5}}), Op("random_flip"),
                        Op("random_rotation", {{"degrees", 10.0}}), Op("hwc_to_chw")})
                  .Build()));
  const std::vector<BoundOp>& ops = c.nodes[1].ops;
  // parse, reshape, and one warp that reads the uint8 pixels (the rescale
  // folded in) and writes float planes
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_EQ(ops.back().name, "rescale+fused(random_flip+random_rotation)+hwc_to_chw");
  const kernels::WarpSpec& spec = ops.back().inferred.params<ops::FusedWarpParams>().spec;
  EXPECT_TRUE(spec.chw_out);
  EXPECT_TRUE(spec.rescaled);
  EXPECT_EQ(spec.dtype, DType::kUInt8);
  EXPECT_EQ(spec.scale, 0.5f);
  EXPECT_EQ(c.output_schema().ToString(), "{image: float32[3,32,32], label: int64[]}");
  // A rescale before a flip alone (which copies pixels) stays an op.
  ASSERT_OK_AND_ASSIGN(
      CompiledPipeline flip,
      Compile(Cifar()
                  .Map({Op("reshape", {{"shape", {32, 32, 3}}}), Op("rescale", {{"scale", 0.5}}), Op("random_flip")})
                  .Build()));
  EXPECT_EQ(flip.nodes[1].ops.size(), 4u);
  // A flip alone copies pixels: the layout change stays an op of its own.
  ASSERT_OK_AND_ASSIGN(
      CompiledPipeline flip_only,
      Compile(Cifar().Map({Op("reshape", {{"shape", {32, 32, 3}}}), Op("random_flip"), Op("hwc_to_chw")}).Build()));
  EXPECT_EQ(flip_only.nodes[1].ops.back().name, "hwc_to_chw");
}

TEST_F(CompileTest, ACudaMapInABuildWithoutCudaNamesTheOpAndHowToGetCuda) {
  if (ops::OpRegistry::Global().runtime(ops::Backend::kCuda) != nullptr) {
    GTEST_SKIP() << "this build has the cuda backend (SLUICE_WITH_CUDA)";
  }
  EXPECT_THAT(
      Compile(
          Cifar().Map({Op("reshape", {{"shape", {32, 32, 3}}}), Op("rescale", {{"scale", 0.5}})}, 0, "cuda").Build()),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("node 'map_1' (nodes[1]): device \"cuda\" (op 'reshape'): this build of "
                         "sluice has no cuda backend: rebuild with -DSLUICE_WITH_CUDA=ON")));
}

TEST_F(CompileTest, AMapsDeviceIsCpuOrCuda) {
  EXPECT_THAT(Compile(Cifar().Map({Op("rescale", {{"scale", 0.5}})}, 0, "tpu").Build()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("node 'map_1' (nodes[1]): device must be \"cpu\" or \"cuda\", got \"tpu\"")));
}

TEST_F(CompileTest, ABatchLevelOpRunsOnlyAfterTheBatchNodeOnWholeBatches) {
  ops::OpRegistry registry;
  SLUICE_ASSERT_OK(ops::RegisterBuiltinOps(&registry));
  SLUICE_ASSERT_OK(testing::RegisterTestOps(&registry));
  EXPECT_THAT(Compile(Cifar().Map({Op("batch_sum")}).Batch(4).Build(), registry),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("op 'batch_sum' works on whole batches: put it in a map after the batch node")));
  ASSERT_OK_AND_ASSIGN(CompiledPipeline c,
                       Compile(Cifar().Batch(64).Map({Op("batch_sum")}).Threads(2).Build(), registry));
  EXPECT_EQ(c.nodes.back().ops.back().level, ops::OpLevel::kBatch);
}

TEST_F(CompileTest, UnknownOpNamesNodeAndOp) {
  EXPECT_THAT(Compile(Cifar().Map({Op("gaussian_blurr")}).Build()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("node 'map_1' (nodes[1]): ops[0]: unknown op 'gaussian_blurr'")));
}

TEST_F(CompileTest, WrongAttrTypeNamesNodeOpAndAttr) {
  EXPECT_THAT(
      Compile(Cifar()
                  .Map({Op("reshape", {{"shape", {32, 32, 3}}}),
                        Op("gaussian_blur", {{"ksize", "eleven"}, {"sigma", 1.0}})})
                  .Build()),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("node 'map_1' (nodes[1]): ops[1]: op 'gaussian_blur': attr 'ksize' must be an integer")));
}

TEST_F(CompileTest, ShapeMismatchIsCaughtBeforeRunning) {
  EXPECT_THAT(Compile(Cifar().Map({Op("gaussian_blur", {{"sigma", 1.0}})}).Build()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("column 'image' has shape [3072] but this op needs an image")));
}

TEST_F(CompileTest, MissingColumnNamesIt) {
  EXPECT_THAT(Compile(Cifar().Map({Op("rescale", {{"field", "pixels"}, {"scale", 2.0}})}).Build()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("attr 'field' names no column: 'pixels' (columns: image, label)")));
}

TEST_F(CompileTest, StructuralErrors) {
  EXPECT_THAT(Compile(PipelineDef()), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no nodes")));
  EXPECT_THAT(Compile(Cifar().Batch(2).Batch(2).Build()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("may batch only once")));
  EXPECT_THAT(Compile(Cifar().Batch(0).Build()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("node 'batch_1' (nodes[1]): size must be > 0")));
  EXPECT_THAT(Compile(Cifar().Batch(2).Shuffle(10).Build()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("shuffle after batch")));
  EXPECT_THAT(Compile(Cifar().Filter(Op("rescale", {{"scale", 1.0}})).Build()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is not a predicate")));
  PipelineDef no_source = Cifar().Build();
  no_source.mutable_nodes(0)->mutable_batch()->set_size(1);
  EXPECT_THAT(Compile(no_source),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("the first node must be a source")));
}

TEST_F(CompileTest, TwoNodesOfOneNameAreRefusedNamingBoth) {
  EXPECT_THAT(Compile(Cifar().Named("front").Map({Op("reshape", {{"shape", {32, 32, 3}}})}).Named("front").Build()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("node 'front' (nodes[1]): nodes[0] has the same name; node names must be unique")));
  // A given name that another node has by default.
  EXPECT_THAT(Compile(Cifar().Map({Op("random_flip")}).Batch(2).Named("map_1").Build()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("node 'map_1' (nodes[2]): nodes[1] has")));
  SLUICE_EXPECT_OK(
      Compile(Cifar().Named("front").Map({Op("reshape", {{"shape", {32, 32, 3}}})}).Named("shape").Build()).status());
}

TEST_F(CompileTest, BadFeatureDeclarations) {
  EXPECT_THAT(Compile(PipelineBuilder::TfRecord({dir_.Join("*.tfrecord")}, {BytesFeature("image", -3)}).Build()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("features[0] 'image': length must be > 0, or 0 for values of any length")));
  TfRecordFeature f = Int64Feature("label");
  f.dtype = "string";
  EXPECT_THAT(
      Compile(PipelineBuilder::TfRecord({dir_.Join("*.tfrecord")}, {f}).Build()),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("dtype must be \"bytes\", \"int64\" or \"float32\"")));
  // A field of the other kinds is refused, not ignored.
  TfRecordFeature shaped = BytesFeature("image");
  shaped.shape = {16};
  EXPECT_THAT(Compile(PipelineBuilder::TfRecord({dir_.Join("*.tfrecord")}, {shaped}).Build()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("features[0] 'image': shape is for int64 and float32 features")));
  TfRecordFeature long_label = Int64Feature("label");
  long_label.length = 5;
  EXPECT_THAT(Compile(PipelineBuilder::TfRecord({dir_.Join("*.tfrecord")}, {long_label}).Build()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("features[0] 'label': length is for bytes features; an int64 feature's values are "
                                 "its `shape`")));
}

TEST_F(CompileTest, MissingFilesAreNotFoundNamingThePattern) {
  EXPECT_THAT(Compile(PipelineBuilder::TfRecord({dir_.Join("*.tfrec")}).Build()),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("node 'source_0' (nodes[0]): no file matches pattern '" +
                                                              dir_.Join("*.tfrec") + "'")));
}

// pipelines/*.json are what the README runs; they must stay the workloads
// the bench measures.
TEST_F(CompileTest, ADistributeNodeSplitsThePipelineInTwoParts) {
  const PipelineDef def =
      Cifar().Map({Op("reshape", {{"shape", {32, 32, 3}}})}).Distribute().Batch(4).Map({Op("random_flip")}).Build();
  ASSERT_OK_AND_ASSIGN(int d, FindDistribute(def));
  EXPECT_EQ(d, 2);
  ASSERT_OK_AND_ASSIGN(CompiledPipeline workers, Compile(def, ops::OpRegistry::Global(), {0, d, Schema(), false}));
  EXPECT_EQ(workers.nodes.back().kind, NodeKind::kMap);
  ASSERT_OK_AND_ASSIGN(CompiledPipeline consumer,
                       Compile(def, ops::OpRegistry::Global(), {d, -1, workers.output_schema(), workers.batched()}));
  ASSERT_EQ(consumer.nodes.size(), 3u);
  EXPECT_EQ(consumer.nodes[0].kind, NodeKind::kRemote);
  EXPECT_EQ(consumer.nodes[0].output_schema.ToString(), "{image: uint8[32,32,3], label: int64[]}");
  // Names (and so random keys) skip the distribute node.
  EXPECT_EQ(consumer.nodes[2].name, "map_3");

  PipelineDef two = def;
  *two.add_nodes()->mutable_distribute() = DistributeDef();
  EXPECT_THAT(FindDistribute(two),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("nodes[5]: a pipeline may have one distribute node (another is nodes[2])")));
  EXPECT_THAT(Compile(def, ops::OpRegistry::Global(), {1, -1, Schema(), false}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("starts at the distribute node")));
}

}  // namespace
}  // namespace sluice::graph

namespace sluice::graph {
namespace {

// Compiling starts no Python (the pool starts on the first read); each
// process gets a split of its own, unless parallel_reads says otherwise.
TEST(CompilePythonDatasetTest, ReadsAsManySplitsAtOnceAsItHasProcesses) {
  auto compile = [](const std::string& extra) {
    return Compile(*PipelineFromJson(
        R"({"nodes": [{"source": {"python_dataset": {"dataset": "no_such_module:make", "length": 100,
            "columns": [{"name": "x", "dtype": "int64"}], "processes": 3)" +
        extra + "}}]}"));
  };
  ASSERT_OK_AND_ASSIGN(CompiledPipeline dataset, compile("}"));
  EXPECT_EQ(dataset.nodes[0].parallel_reads, 3);
  ASSERT_OK_AND_ASSIGN(CompiledPipeline generator, compile(R"(, "generator": true})"));
  EXPECT_EQ(generator.nodes[0].parallel_reads, 1);
  EXPECT_EQ(generator.nodes[0].format->MakeSplits().size(), 1u);
  ASSERT_OK_AND_ASSIGN(CompiledPipeline set, compile(R"(}, "parallel_reads": 2)"));
  EXPECT_EQ(set.nodes[0].parallel_reads, 2);
}

}  // namespace
}  // namespace sluice::graph
