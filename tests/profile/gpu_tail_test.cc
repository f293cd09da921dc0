// TailOnGpu moves the ops at the end of a pipeline that have cuda kernels
// into one cuda map after the batch (a pure rewrite of the definition,
// checked here without a GPU; `profile` measures it where there is one).
#include "sluice/profile/gpu_tail.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/pipeline_builder.h"
#include "status_matchers.h"

namespace sluice::profile {
namespace {

using ::sluice::testing::StatusIs;
using ::testing::_;
using ::testing::HasSubstr;

// The ops of each node, "op,op|" per map and the node kind otherwise.
std::string Shape(const PipelineDef& def) {
  std::string s;
  for (const NodeDef& n : def.nodes()) {
    if (n.has_map()) {
      s += n.map().device() == "cuda" ? "cuda[" : "map[";
      for (const OpDef& op : n.map().ops()) s += op.op() + ",";
      s += "] ";
    } else if (n.has_batch()) {
      s += "batch ";
    } else if (n.has_source()) {
      s += "source ";
    } else if (n.has_shuffle()) {
      s += "shuffle ";
    } else if (n.has_prefetch()) {
      s += "prefetch ";
    } else {
      s += "other ";
    }
  }
  return s;
}

PipelineBuilder Cifar() {
  return PipelineBuilder::TfRecord({"/d/*.tfrecord"}, {BytesFeature("image", 3072), Int64Feature("label")});
}

bool Cuda() { return ops::OpRegistry::Global().runtime(ops::Backend::kCuda) != nullptr; }

TEST(TailOnGpu, MovesW2sOpsBeforeAndAfterTheBatchIntoOneCudaMap) {
  if (!Cuda()) GTEST_SKIP() << "this build has no cuda backend: no op runs on cuda";
  const PipelineDef def = Cifar()
                              .Map({Op("decode_raw", {{"dtype", "uint8"}}), Op("reshape", {{"shape", {32, 32, 3}}}),
                                    Op("grey_dilation", {{"size", 3}})})
                              .Batch(1024)
                              .Map({Op("rescale", {{"scale", 0.5}}), Op("random_flip", {})})
                              .Prefetch()
                              .Build();
  ASSERT_OK_AND_ASSIGN(PipelineDef gpu, TailOnGpu(def, ops::OpRegistry::Global()));
  EXPECT_EQ(Shape(gpu), "source batch cuda[decode_raw,reshape,grey_dilation,rescale,random_flip,] prefetch ");
}

TEST(TailOnGpu, KeepsWhatHasNoCudaKernelAndWhatComesBeforeAShuffle) {
  if (!Cuda()) GTEST_SKIP() << "this build has no cuda backend: no op runs on cuda";
  const PipelineDef def = PipelineBuilder::ImageFolder("/d")
                              .Map({Op("rescale", {{"scale", 0.5}})})
                              .Shuffle(100)
                              .Map({Op("decode_random_resized_crop", {{"size", {8}}}), Op("crop_mirror_normalize", {})})
                              .Batch(16)
                              .Build();
  ASSERT_OK_AND_ASSIGN(PipelineDef gpu, TailOnGpu(def, ops::OpRegistry::Global()));
  // With nvJPEG the decode moves too: the batch then carries the bytes.
  EXPECT_EQ(Shape(gpu),
            ops::OpRegistry::Global().Runs("decode_random_resized_crop", ops::Backend::kCuda)
                ? "source map[rescale,] shuffle batch cuda[decode_random_resized_crop,crop_mirror_normalize,] "
                : "source map[rescale,] shuffle map[decode_random_resized_crop,] batch "
                  "cuda[crop_mirror_normalize,] ");
}

TEST(TailOnGpu, SaysWhyWhenThereIsNoTail) {
  const PipelineDef no_batch = Cifar().Map({Op("grey_dilation", {{"size", 3}})}).Build();
  EXPECT_THAT(TailOnGpu(no_batch, ops::OpRegistry::Global()), StatusIs(absl::StatusCode::kNotFound, _));
  const PipelineDef cpu_last =
      Cifar()
          .Map({Op("decode_raw", {{"dtype", "uint8"}}), Op("reshape", {{"shape", {32, 32, 3}}})})
          .Batch(4)
          .Map({Op("random_perspective", {})})
          .Build();
  EXPECT_THAT(TailOnGpu(cpu_last, ops::OpRegistry::Global()),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("no ops at the end of the pipeline have cuda kernels")));
}

}  // namespace
}  // namespace sluice::profile
