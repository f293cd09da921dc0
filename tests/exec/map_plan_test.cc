// The map plan's in-place runs (ops::OpSchema::InPlace): an op on whole
// batches gets its input column's buffer as its output when nothing else
// holds it, and gives the same values as when it writes a new buffer.
#include "sluice/exec/map_plan.h"

#include <cstring>
#include <memory>

#include "gtest/gtest.h"
#include "sluice/graph/compiled_pipeline.h"
#include "sluice/ops/op_registry.h"
#include "sluice/pipeline_builder.h"
#include "status_matchers.h"

namespace sluice::exec {
namespace {

constexpr int64_t kRows = 16, kC = 3, kH = 8, kW = 6;

// The map node of source -> batch -> map(`ops`), its kernels made.
graph::CompiledNode MapNode(std::vector<OpSpec> ops) {
  std::vector<float> images(kRows * kC * kH * kW, 0.f);
  std::vector<int64_t> labels(kRows, 0);
  const PipelineDef def = PipelineBuilder::Arrays({MakeArrayColumn("image", {kC, kH, kW}, images),
                                                   MakeArrayColumn("label", {}, labels)})
                              .Batch(kRows)
                              .Map(std::move(ops))
                              .Build();
  absl::StatusOr<graph::CompiledPipeline> compiled = graph::Compile(def);
  EXPECT_TRUE(compiled.ok()) << compiled.status();
  graph::CompiledNode node = compiled->nodes.back();
  for (graph::BoundOp& b : node.ops) {
    absl::StatusOr<std::unique_ptr<ops::Kernel>> k =
        ops::OpRegistry::Global().MakeKernel(b.op, ops::Backend::kCpu, b.inferred);
    EXPECT_TRUE(k.ok()) << k.status();
    b.kernel = std::move(*k);
  }
  return node;
}

// A batch in fresh buffers: image values row * 1000 + i, labels row % 10.
Batch FreshBatch() {
  Batch b;
  b.rows = kRows;
  Tensor image = Tensor::Allocate(DType::kFloat32, Shape{kRows, kC, kH, kW});
  Tensor label = Tensor::Allocate(DType::kInt64, Shape{kRows});
  for (int64_t i = 0; i < kRows * kC * kH * kW; ++i) image.data<float>()[i] = static_cast<float>(i / (kC * kH * kW) * 1000 + i % 97);
  for (int64_t r = 0; r < kRows; ++r) label.data<int64_t>()[r] = r % 10;
  b.columns.push_back(Column{std::move(image), Tensor()});
  b.columns.push_back(Column{std::move(label), Tensor()});
  return b;
}

TEST(MapPlanInPlace, AnUnsharedBatchColumnIsWrittenInPlaceWithTheSameValues) {
  const std::vector<std::vector<OpSpec>> chains = {
      {Op("mixup", {{"num_classes", 10}})},
      {Op("cutmix", {{"num_classes", 10}})},
      {Op("cutmix", {{"num_classes", 10}}), Op("mixup", {{"num_classes", 10}})},  // a chain in one node
  };
  for (const std::vector<OpSpec>& ops : chains) {
    SCOPED_TRACE(ops.size() == 1 ? ops[0].op : "cutmix, mixup");
    const graph::CompiledNode node = MapNode(ops);
    const std::unique_ptr<MapPlan> plan = MapPlan::Make(node);
    MapPlan::RunArgs args;
    args.seed = 3;
    for (int64_t first = 0; first < 20 * kRows; first += kRows) {  // batches with other draws
      args.first_sample = first;
      // Held elsewhere too: the op writes a new buffer.
      Batch shared = FreshBatch();
      const Tensor held = shared.columns[0].values;
      Batch copied;
      SLUICE_ASSERT_OK(plan->Run(shared, args, &copied));
      EXPECT_NE(copied.columns[0].values.raw_data(), held.raw_data());
      // Held by the batch alone: in place, the same values.
      Batch alone = FreshBatch();
      const uint8_t* where = alone.columns[0].values.raw_data();
      Batch in_place;
      SLUICE_ASSERT_OK(plan->Run(alone, args, &in_place));
      EXPECT_EQ(in_place.columns[0].values.raw_data(), where);
      const size_t bytes = copied.columns[0].values.byte_size();
      ASSERT_EQ(in_place.columns[0].values.byte_size(), bytes);
      EXPECT_EQ(std::memcmp(in_place.columns[0].values.raw_data(), copied.columns[0].values.raw_data(), bytes), 0)
          << "batch at " << first;
      EXPECT_EQ(std::memcmp(in_place.columns[1].values.raw_data(), copied.columns[1].values.raw_data(),
                            copied.columns[1].values.byte_size()),
                0);
    }
  }
}

TEST(MapPlanInPlace, AColumnOfAnotherSpecIsNeverAliased) {
  // cutmix's label output (float32 soft labels) replaces an int64 column:
  // never its buffer.
  const graph::CompiledNode node =
      MapNode({Op("cutmix", {{"num_classes", 10}, {"p", 0.0}})});
  const std::unique_ptr<MapPlan> plan = MapPlan::Make(node);
  Batch alone = FreshBatch();
  const Tensor label_before = alone.columns[1].values;  // kept: the labels must stay as they were
  Batch out;
  SLUICE_ASSERT_OK(plan->Run(alone, MapPlan::RunArgs(), &out));
  for (int64_t r = 0; r < kRows; ++r) EXPECT_EQ(label_before.data<int64_t>()[r], r % 10);
  EXPECT_EQ(out.columns[1].values.dtype(), DType::kFloat32);
}

}  // namespace
}  // namespace sluice::exec
