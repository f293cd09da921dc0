// How a map node runs its op chain on a chunk: row tiles pass through every
// op while they are in cache, intermediate values live in per-thread
// scratch, and each op that produces a final column writes straight into
// the output chunk (the batch itself, when the chunk is a batch): no
// per-sample allocation and no gather copy afterwards.
#ifndef SLUICE_EXEC_MAP_PLAN_H_
#define SLUICE_EXEC_MAP_PLAN_H_

#include <atomic>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "sluice/core/batch.h"
#include "sluice/core/schema.h"
#include "sluice/exec/trace_buffer.h"
#include "sluice/graph/compiled_pipeline.h"

namespace sluice::exec {

// Immutable after Make; Run is thread-safe.
class MapPlan {
 public:
  // REQUIRES: `ops` were bound against `input` by graph::Compile.
  static std::unique_ptr<MapPlan> Make(const Schema& input, const std::vector<graph::BoundOp>& ops);

  const Schema& output_schema() const { return output_schema_; }

  struct RunArgs {
    uint64_t seed = 0;
    uint64_t epoch = 0;
    int64_t first_sample = 0;  // input stream position of row 0
    BufferPool* pool = BufferPool::Default();
    // When set, each op's time is added to its entry (one per op of the
    // chain, views included).
    std::vector<std::atomic<int64_t>>* op_ns = nullptr;
    // When set, a span per op and row tile.
    TraceBuffer* trace = nullptr;
  };
  // Applies the chain to all rows of `in`. Errors carry the op's name.
  absl::Status Run(const Batch& in, const RunArgs& args, Batch* out) const;

  // Run in parts, so that several threads can share one chunk:
  // the output buffers of a chunk of `rows` rows,
  std::vector<Tensor> AllocateOutputs(int64_t rows, BufferPool* pool) const;
  // (their sizes in bytes),
  std::vector<size_t> OutputBytes(int64_t rows) const;
  // the chain on rows [begin, end) (safe on disjoint ranges concurrently),
  absl::Status RunRows(const Batch& in, int64_t begin, int64_t end, const RunArgs& args,
                       const std::vector<Tensor>& outputs) const;
  // and the output chunk: `in`'s passed-through columns plus `outputs`
  // (variable-length bytes an op produced are gathered here, into `pool`).
  Batch Assemble(const Batch& in, const std::vector<Tensor>& outputs, BufferPool* pool) const;

 private:
  enum class Storage { kInput, kOutput, kScratch };
  // A value is one op output (or input column), immutable once written.
  // View ops (reshape) give a value a new spec without new storage.
  struct Value {
    ColumnSpec spec;       // as first produced
    int64_t row_bytes = 0;
    Storage storage = Storage::kScratch;
    int input_column = -1;   // kInput
    int output_slot = -1;    // kOutput: index into the per-run output tensors
    // Variable-length bytes produced by an op: stored as one string_view
    // per row into the chunk's input (row_bytes is a view's size).
    bool views = false;
  };
  struct Step {
    std::string name;
    int op_index;  // in the chain
    uint64_t op_key;
    std::shared_ptr<const ops::Kernel> kernel;
    std::vector<int> inputs;   // value ids
    std::vector<int> outputs;  // value ids
  };
  struct OutputColumn {
    int value;
    ColumnSpec spec;  // final spec (after views)
  };

  MapPlan() = default;

  Schema output_schema_;
  std::vector<Value> values_;
  std::vector<Step> steps_;
  std::vector<OutputColumn> outputs_;
  std::vector<int> output_slot_values_;  // value id of each output slot
  int64_t tile_rows_ = 1;
  int64_t scratch_row_bytes_ = 0;  // scratch bytes per tile row, all values
};

}  // namespace sluice::exec

#endif  // SLUICE_EXEC_MAP_PLAN_H_
