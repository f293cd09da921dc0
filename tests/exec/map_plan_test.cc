// The map plan's in-place runs (ops::OpSchema::InPlace): an op on whole
// batches gets its input column's buffer as its output when nothing else
// holds it, and gives the same values as when it writes a new buffer. And
// which steps write past the caches (KernelContext::bypass_cache), and the
// rows a kernel gets a call (tiles, or whole ranges).
#include "sluice/exec/map_plan.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "sluice/graph/compiled_pipeline.h"
#include "sluice/ops/field.h"
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
  const PipelineDef def =
      PipelineBuilder::Arrays({MakeArrayColumn("image", {kC, kH, kW}, images), MakeArrayColumn("label", {}, labels)})
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
  for (int64_t i = 0; i < kRows * kC * kH * kW; ++i)
    image.data<float>()[i] = static_cast<float>(i / (kC * kH * kW) * 1000 + i % 97);
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

// Memory a source adopted (a user's arrays, a mapped file) is never
// written in place, even when the batch holds its only Buffer.
TEST(MapPlanInPlace, AdoptedMemoryIsNeverWritten) {
  const graph::CompiledNode node = MapNode({Op("mixup", {{"num_classes", 10}})});
  const std::unique_ptr<MapPlan> plan = MapPlan::Make(node);
  Batch adopted = FreshBatch();
  auto owned = std::make_shared<std::vector<float>>(adopted.columns[0].values.data<float>(),
                                                    adopted.columns[0].values.data<float>() + kRows * kC * kH * kW);
  const std::vector<float> before = *owned;
  adopted.columns[0].values =
      Tensor(DType::kFloat32, Shape{kRows, kC, kH, kW},
             Buffer::Adopt(reinterpret_cast<uint8_t*>(owned->data()), owned->size() * sizeof(float), owned));
  MapPlan::RunArgs args;
  args.seed = 3;
  Batch out;
  SLUICE_ASSERT_OK(plan->Run(adopted, args, &out));
  EXPECT_NE(out.columns[0].values.raw_data(), reinterpret_cast<uint8_t*>(owned->data()));
  EXPECT_EQ(*owned, before);
}

TEST(MapPlanInPlace, AColumnOfAnotherSpecIsNeverAliased) {
  // cutmix's label output (float32 soft labels) replaces an int64 column:
  // never its buffer.
  const graph::CompiledNode node = MapNode({Op("cutmix", {{"num_classes", 10}, {"p", 0.0}})});
  const std::unique_ptr<MapPlan> plan = MapPlan::Make(node);
  Batch alone = FreshBatch();
  const Tensor label_before = alone.columns[1].values;  // kept: the labels must stay as they were
  Batch out;
  SLUICE_ASSERT_OK(plan->Run(alone, MapPlan::RunArgs(), &out));
  for (int64_t r = 0; r < kRows; ++r) EXPECT_EQ(label_before.data<int64_t>()[r], r % 10);
  EXPECT_EQ(out.columns[1].values.dtype(), DType::kFloat32);
}

// A copy of a float column that records, per op key, whether the executor
// told it to write past the caches, and the rows of its calls.
struct CallsSeen {
  std::atomic<int> bypass[4] = {-1, -1, -1, -1};
  std::atomic<int64_t> calls[4] = {0, 0, 0, 0};
  std::atomic<int64_t> most_rows[4] = {0, 0, 0, 0};
  void Reset() {
    for (int k = 0; k < 4; ++k) bypass[k] = -1, calls[k] = 0, most_rows[k] = 0;
  }
};
CallsSeen& Seen() {
  static CallsSeen seen;
  return seen;
}
struct RecordCallsParams {
  int64_t row_bytes;
};
class RecordCallsKernel : public ops::Kernel {
 public:
  using Params = RecordCallsParams;
  explicit RecordCallsKernel(const Params& p) : row_bytes_(p.row_bytes) {}
  absl::Status Run(const ops::KernelContext& ctx, absl::Span<const ops::ColumnRef> in,
                   absl::Span<const ops::ColumnRef> out) const override {
    const uint64_t key = ctx.op_key % 4;
    Seen().bypass[key] = ctx.bypass_cache ? 1 : 0;
    ++Seen().calls[key];
    Seen().most_rows[key] = std::max(Seen().most_rows[key].load(), ctx.rows);
    std::memcpy(out[0].data, in[0].data, static_cast<size_t>(row_bytes_ * ctx.rows));
    return absl::OkStatus();
  }

 private:
  int64_t row_bytes_;
};
// test_record_calls, and test_record_calls_whole, which asks for whole
// ranges (ops::OpSchema::WholeRanges).
void RegisterRecordCalls() {
  static const bool registered = [] {
    ops::OpRegistry& registry = ops::OpRegistry::Global();
    for (const bool whole : {false, true}) {
      const std::string name = whole ? "test_record_calls_whole" : "test_record_calls";
      ops::OpSchema schema(name);
      schema.Doc("copies a float column; records KernelContext::bypass_cache and its calls' rows")
          .Attr(ops::FieldAttr())
          .Input("field", "float32")
          .Output("field", "the same")
          .Infer([](const ops::Attrs& attrs, const Schema& schema) -> absl::StatusOr<ops::InferredOp> {
            absl::StatusOr<ops::BoundField> f = ops::BindField(attrs, schema, {DType::kFloat32});
            if (!f.ok()) return f.status();
            return ops::UnaryOp(f->column, f->spec, RecordCallsParams{f->spec.row_bytes()});
          });
      if (whole) schema.WholeRanges();
      EXPECT_TRUE(registry.AddOp(std::move(schema)).ok());
      EXPECT_TRUE(registry.AddKernel<RecordCallsKernel>(name, ops::Backend::kCpu).ok());
    }
    return true;
  }();
  (void)registered;
}

// Runs `ops` (each keyed by its place) over one chunk of `rows` rows of
// `row_floats` floats, all 2.
Batch RunChunk(const std::vector<OpSpec>& ops, int64_t rows, int64_t row_floats) {
  std::vector<float> values(rows * row_floats, 1.f);
  const PipelineDef def =
      PipelineBuilder::Arrays({MakeArrayColumn("x", {row_floats}, values)}).Batch(rows).Map(ops).Build();
  absl::StatusOr<graph::CompiledPipeline> compiled = graph::Compile(def);
  EXPECT_TRUE(compiled.ok()) << compiled.status();
  graph::CompiledNode node = compiled->nodes.back();
  EXPECT_EQ(node.ops.size(), ops.size());
  for (size_t i = 0; i < node.ops.size(); ++i) {
    node.ops[i].op_key = i;  // where each records
    absl::StatusOr<std::unique_ptr<ops::Kernel>> k =
        ops::OpRegistry::Global().MakeKernel(node.ops[i].op, ops::Backend::kCpu, node.ops[i].inferred);
    EXPECT_TRUE(k.ok()) << k.status();
    node.ops[i].kernel = std::move(*k);
  }
  const std::unique_ptr<MapPlan> plan = MapPlan::Make(node);
  Batch in;
  in.rows = rows;
  Tensor x = Tensor::Allocate(DType::kFloat32, Shape{rows, row_floats});
  std::fill_n(x.data<float>(), rows * row_floats, 2.f);
  in.columns.push_back(Column{std::move(x), Tensor()});
  Seen().Reset();
  Batch out;
  EXPECT_TRUE(plan->Run(in, MapPlan::RunArgs(), &out).ok());
  return out;
}

// A final column that no later step reads is written past the caches once
// a chunk of it passes 8 MiB (it is evicted before its consumer reads it);
// a value the next step reads, and a small chunk, stay in the caches.
TEST(MapPlanCacheBypass, OnlyALargeChunksFinalColumnGoesPastTheCaches) {
  RegisterRecordCalls();
  struct Case {
    int64_t rows, row_floats;
    bool large;
  };
  for (const Case& c : {Case{64, 1 << 16, true}, Case{64, 1 << 10, false}}) {
    const Batch out = RunChunk({Op("test_record_calls", {{"field", "x"}}), Op("test_record_calls", {{"field", "x"}})},
                               c.rows, c.row_floats);
    EXPECT_EQ(Seen().bypass[0], 0) << "the first op's output is read by the second";
    EXPECT_EQ(Seen().bypass[1], c.large ? 1 : 0) << c.rows * c.row_floats * 4 << " bytes a chunk";
    EXPECT_EQ(out.columns[0].values.data<float>()[c.rows * c.row_floats - 1], 2.f);
  }
}

// Rows of 64 KiB keep a tile to a few rows, so that its scratch stays in
// L2; with an op that asks for whole ranges in the chain, every op of it
// gets the whole range in one call (the python op's processes would
// otherwise wait on a round trip every few rows).
TEST(MapPlanTiles, AnOpAskingForWholeRangesGetsTheRangeInOneCall) {
  RegisterRecordCalls();
  constexpr int64_t kChunkRows = 64, kRowFloats = 1 << 14;
  const Batch tiled = RunChunk({Op("test_record_calls", {{"field", "x"}}), Op("test_record_calls", {{"field", "x"}})},
                               kChunkRows, kRowFloats);
  EXPECT_GT(Seen().calls[0], 1);
  EXPECT_LT(Seen().most_rows[0], kChunkRows);
  const Batch whole =
      RunChunk({Op("test_record_calls", {{"field", "x"}}), Op("test_record_calls_whole", {{"field", "x"}})}, kChunkRows,
               kRowFloats);
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(Seen().calls[k], 1) << "op " << k;
    EXPECT_EQ(Seen().most_rows[k], kChunkRows) << "op " << k;
  }
  ASSERT_EQ(whole.columns[0].values.byte_size(), tiled.columns[0].values.byte_size());
  EXPECT_EQ(std::memcmp(whole.columns[0].values.raw_data(), tiled.columns[0].values.raw_data(),
                        tiled.columns[0].values.byte_size()),
            0);
}

// A whole range of large rows would take a thread hundreds of MiB of
// scratch: the calls stop at 16 MiB of it (4 rows of 4 MiB here).
TEST(MapPlanTiles, AWholeRangeOfLargeRowsIsCutAt16MiBOfScratch) {
  RegisterRecordCalls();
  constexpr int64_t kChunkRows = 8, kRowFloats = 1 << 20;
  const Batch out =
      RunChunk({Op("test_record_calls", {{"field", "x"}}), Op("test_record_calls_whole", {{"field", "x"}})}, kChunkRows,
               kRowFloats);
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(Seen().calls[k], 2) << "op " << k;
    EXPECT_EQ(Seen().most_rows[k], 4) << "op " << k;
  }
  EXPECT_EQ(out.columns[0].values.data<float>()[kChunkRows * kRowFloats - 1], 2.f);
}

}  // namespace
}  // namespace sluice::exec
