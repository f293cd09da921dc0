// How a map node runs its op chain on a chunk: row tiles pass through every
// op while they are in cache, intermediate values live in per-thread
// scratch, and each op that produces a final column writes straight into
// the output chunk (the batch itself, when the chunk is a batch): no
// per-sample allocation and no gather copy afterwards.
//
// On a device backend (a cuda map) the chunk is one tile: its input
// columns are copied to the device (variable-length bytes stay on the
// host, for the kernels that take them there: decoders), intermediate
// values and outputs are device memory, every kernel is queued on the
// runner thread's stream, and the chunk is handed on at once: its device
// columns carry an event that consumers wait on (ops/device_runtime.h).
#ifndef SLUICE_EXEC_MAP_PLAN_H_
#define SLUICE_EXEC_MAP_PLAN_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "sluice/core/batch.h"
#include "sluice/core/core_share.h"
#include "sluice/core/schema.h"
#include "sluice/exec/trace_buffer.h"
#include "sluice/graph/compiled_pipeline.h"

namespace sluice::exec {

// How errors name an op: "op 'NAME'", and the plugin that registered it
// ("op 'cutout' (plugin /opt/lib/libcutout.so)"), so a user of several
// plugins knows whose kernel failed.
std::string OpContext(const graph::BoundOp& op);

// Immutable after Make; Run is thread-safe.
class MapPlan {
 public:
  // REQUIRES: `node`'s ops were inferred against its input schema by
  // graph::Compile and have their kernels (Pipeline makes them), or are
  // views; `runtime` is the node's device runtime (null for cpu).
  static std::unique_ptr<MapPlan> Make(const graph::CompiledNode& node, ops::DeviceRuntime* runtime = nullptr);

  const Schema& output_schema() const { return output_schema_; }
  // Whether every run must cover a whole chunk (a device backend, or a
  // batch-level op): the map node then never splits chunks among runners.
  bool whole_chunks() const { return whole_chunks_; }

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
    const std::atomic<bool>* cancelled = nullptr;  // KernelContext::cancelled
    CoreShare* core = nullptr;                     // KernelContext::core
    std::atomic<int64_t>* progress = nullptr;      // KernelContext::progress
  };
  // Applies the chain to all rows of `in`. Errors carry the op's name.
  absl::Status Run(const Batch& in, const RunArgs& args, Batch* out) const;

  // Run in parts, so that several threads can share one chunk:
  // the output buffers of chunk `in` (device memory on a device backend;
  // an in-place op's output is its input column's buffer, when nothing
  // else holds that),
  // A pool's blocks have room for `room_rows` rows when in has fewer (the
  // rest of a batch can then be copied in place, see BatchBuilder).
  absl::StatusOr<std::vector<Tensor>> AllocateOutputs(const Batch& in, BufferPool* pool, int64_t room_rows = 0) const;
  // (their sizes in bytes, and the pool's blocks they take together),
  std::vector<size_t> OutputBytes(int64_t rows) const;
  int64_t ChunkBlockBytes(int64_t rows) const;
  // the chain on rows [begin, end) (safe on disjoint ranges concurrently;
  // REQUIRES: the whole chunk when whole_chunks()),
  absl::Status RunRows(const Batch& in, int64_t begin, int64_t end, const RunArgs& args,
                       const std::vector<Tensor>& outputs) const;
  // A row refused by a kernel leaves its outputs unwritten: its views of
  // variable-length bytes are emptied, so that Assemble gathers nothing
  // from them (the row is dropped after).
  void ForgetRow(int64_t row, const std::vector<Tensor>& outputs) const;
  // and the output chunk: `in`'s passed-through columns plus `outputs`
  // (variable-length bytes an op produced are gathered here, into `pool`).
  Batch Assemble(const Batch& in, const std::vector<Tensor>& outputs, BufferPool* pool) const;

 private:
  enum class Storage { kInput, kOutput, kScratch };
  // A value is one op output (or input column), immutable once written.
  // View ops (reshape) give a value a new spec without new storage.
  struct Value {
    ColumnSpec spec;  // as first produced
    int64_t row_bytes = 0;
    Storage storage = Storage::kScratch;
    int input_column = -1;  // kInput
    int output_slot = -1;   // kOutput: index into the per-run output tensors
    // Variable-length bytes produced by an op: stored as one string_view
    // per row into the chunk's input (row_bytes is a view's size).
    bool views = false;
    // Written by an in-place op (OpSchema::InPlace) over `alias_from`, an
    // input column or an earlier such value: the input column whose buffer
    // it takes over when no one else holds it, or -1. The last of a chain
    // of such values is an output (its slot: alias_slot); the run aliases
    // the whole chain or none of it.
    int alias_input = -1;
    int alias_from = -1;
    int alias_slot = -1;
  };
  struct Step {
    std::string name;
    std::string context;  // errors': OpContext
    int op_index;         // in the chain
    uint64_t op_key;
    const ops::Kernel* kernel;  // owned by the node's BoundOp
    std::vector<int> inputs;    // value ids
    std::vector<int> outputs;   // value ids
    // Bytes per row of its outputs when each is a final column that no
    // later step reads (0 otherwise): past kCacheBypassBytes a chunk's worth
    // is written past the caches (KernelContext::bypass_cache).
    int64_t written_once_row_bytes = 0;
    // A plugin's kernel: its errors say what, not which sample (NameTheRow).
    bool plugin = false;
  };
  struct OutputColumn {
    int value;
    ColumnSpec spec;  // final spec (after views)
  };
  // Where each value of one run lives: a base pointer for row 0 of the run.
  using Bases = absl::InlinedVector<uint8_t*, 16>;

  MapPlan() = default;

  // The steps of Make, in order.
  void AddInputValues(const Schema& input);
  void AddOp(int op_index, const graph::BoundOp& op);
  void AssignFinalColumns();
  // Keeps alias_input only on chains that end in an output and where each
  // value overwritten is read by no later step and is no final column.
  void CheckAliases();
  // Whether value `v` (of a chain) runs in the input's buffer this run.
  bool Aliased(const Value& v, const Batch& in, const std::vector<Tensor>& outputs) const;
  void SizeTiles();
  // Sets each step's written_once_row_bytes.
  void FindWrittenOnce();

  // The value's column for a tile starting `row0` rows into the run, given
  // the run's bases (the ragged input columns come from `in`), from the
  // tile's row `in_tile` on.
  ops::ColumnRef Ref(int value, const Batch& in, int64_t row0, const Bases& bases, int64_t in_tile = 0) const;
  // Step `step`'s error `failed` on a tile, naming the sample: the first of
  // the tile's rows that it fails on alone (the step run again row by row).
  absl::Status NameTheRow(const Step& step, const absl::Status& failed, const Batch& in, int64_t row0,
                          const Bases& bases, const ops::KernelContext& ctx) const;
  // Runs every step on one tile of `ctx.rows` rows starting at `row0`.
  absl::Status RunTile(const Batch& in, int64_t row0, const Bases& bases, ops::KernelContext& ctx, const RunArgs& args,
                       absl::InlinedVector<int64_t, 16>* step_ns) const;
  // RunRows on a device backend: one tile, device memory, one stream; the
  // work is queued, not waited for (the outputs carry its readiness). The
  // step times are those of queueing.
  absl::Status RunOnDevice(const Batch& in, const RunArgs& args, const std::vector<Tensor>& outputs,
                           absl::InlinedVector<int64_t, 16>* step_ns) const;
  ops::KernelContext TileContext(const Batch& in, int64_t row0, int64_t rows, const RunArgs& args) const;

  Schema output_schema_;
  std::vector<Value> values_;
  std::vector<Step> steps_;
  std::vector<OutputColumn> outputs_;
  std::vector<int> output_slot_values_;  // value id of each output slot
  // Current value of each column, by name, in schema order (while making).
  std::vector<std::pair<ColumnSpec, int>> columns_;
  int64_t tile_rows_ = 1;
  int64_t range_tile_rows_ = 1;  // whole_ranges_: at most this many rows a call
  ops::Backend backend_ = ops::Backend::kCpu;
  ops::DeviceRuntime* runtime_ = nullptr;  // device backends
  int device_ = -1;
  bool whole_chunks_ = false;
  bool whole_ranges_ = false;  // an op asks for one call per range (ops::OpSchema::WholeRanges)
};

}  // namespace sluice::exec

#endif  // SLUICE_EXEC_MAP_PLAN_H_
