#include "sluice/exec/map_plan.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/exec/node_stats.h"
#include "sluice/ops/device_runtime.h"
#include "sluice/ops/framework/guarded_call.h"

namespace sluice::exec {
namespace {

// Scratch per thread per tile: small enough to stay in L2 while a tile goes
// through every op of the chain.
constexpr int64_t kScratchBudgetBytes = 256 << 10;
constexpr int64_t kMaxTileRows = 256;
// The most scratch a thread gives a chain whose op asks for whole ranges
// (ops::OpSchema::WholeRanges): W2's range of 512 rows takes 4.5 MiB,
// but a range of large float images would take hundreds.
constexpr int64_t kWholeRangeScratchBytes = 16 << 20;
// A chunk's final column this large is evicted before its consumer reads
// it (W1's batch of 8192 images is 25 MiB): written past the caches, each
// line costs no read before the write, and evicts nothing the next tiles
// need (W1 +12%, W2 +6%; bench/RESULTS.md, 2026-11-27).
constexpr int64_t kCacheBypassBytes = 8 << 20;

int64_t AlignUp(int64_t n) { return (n + 63) & ~int64_t{63}; }

// Rows of string_views as one contiguous ragged column.
Column GatherViews(const absl::string_view* views, int64_t rows, BufferPool* pool) {
  int64_t total = 0;
  for (int64_t r = 0; r < rows; ++r) total += static_cast<int64_t>(views[r].size());
  Column c{Tensor::Allocate(DType::kUInt8, Shape{total}, pool), Tensor::Allocate(DType::kInt64, Shape{rows + 1}, pool)};
  uint8_t* dst = c.values.raw_data();
  int64_t* off = c.offsets.data<int64_t>();
  off[0] = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (!views[r].empty()) std::memcpy(dst + off[r], views[r].data(), views[r].size());
    off[r + 1] = off[r] + static_cast<int64_t>(views[r].size());
  }
  return c;
}

thread_local std::vector<uint8_t> tls_scratch;

// What a kernel's errors are about, as ops::Guarded words them.
constexpr char kKernel[] = "its kernel";

// `status` saying which sample it is about, if it does not already.
absl::Status Naming(const absl::Status& status, const std::string& where) {
  if (absl::StrContains(status.message(), where)) return status;
  return absl::Status(status.code(), absl::StrCat(where, ": ", status.message()));
}

}  // namespace

std::string OpContext(const graph::BoundOp& op) {
  return absl::StrCat("op '", op.name, "'", op.plugin.empty() ? "" : absl::StrCat(" (plugin ", op.plugin, ")"));
}

std::unique_ptr<MapPlan> MapPlan::Make(const graph::CompiledNode& node, ops::DeviceRuntime* runtime) {
  std::unique_ptr<MapPlan> plan(new MapPlan());
  plan->backend_ = node.backend;
  plan->runtime_ = runtime;
  plan->device_ = node.device;
  plan->whole_chunks_ = node.backend != ops::Backend::kCpu;
  plan->AddInputValues(node.input_schema);
  for (size_t i = 0; i < node.ops.size(); ++i) plan->AddOp(static_cast<int>(i), node.ops[i]);
  plan->AssignFinalColumns();
  plan->CheckAliases();
  plan->SizeTiles();
  plan->FindWrittenOnce();
  return plan;
}

void MapPlan::AddInputValues(const Schema& input) {
  for (int i = 0; i < input.size(); ++i) {
    Value v;
    v.spec = input.column(i);
    v.row_bytes = v.spec.row_bytes();
    v.storage = Storage::kInput;
    v.input_column = i;
    values_.push_back(v);
    columns_.emplace_back(input.column(i), i);
  }
}

void MapPlan::AddOp(int op_index, const graph::BoundOp& op) {
  auto find = [&](const std::string& name) -> int {
    for (size_t i = 0; i < columns_.size(); ++i) {
      if (columns_[i].first.name == name) return static_cast<int>(i);
    }
    return -1;
  };
  const ops::InferredOp& b = op.inferred;
  std::vector<int> in_values;
  // Inferred ops index the schema as it stood before them.
  for (int col : b.inputs) in_values.push_back(columns_[col].second);
  std::vector<int> out_values;
  for (const ColumnSpec& spec : b.outputs) {
    int value;
    if (op.view) {
      value = in_values[0];
    } else {
      Value v;
      v.spec = spec;
      v.views = spec.ragged;
      v.row_bytes = spec.ragged ? static_cast<int64_t>(sizeof(absl::string_view)) : spec.row_bytes();
      values_.push_back(v);
      value = static_cast<int>(values_.size()) - 1;
      out_values.push_back(value);
    }
    const int existing = find(spec.name);
    if (existing >= 0) {
      columns_[existing] = {spec, value};
    } else {
      columns_.emplace_back(spec, value);
    }
  }
  for (const std::string& drop : b.drops) {
    const int i = find(drop);
    if (i >= 0) columns_.erase(columns_.begin() + i);
  }
  whole_chunks_ = whole_chunks_ || op.level == ops::OpLevel::kBatch;
  whole_ranges_ = whole_ranges_ || op.whole_ranges;
  if (op.in_place && op.level == ops::OpLevel::kBatch && !out_values.empty() && !in_values.empty()) {
    const Value& in = values_[in_values[0]];
    Value& out = values_[out_values[0]];
    const int column = in.storage == Storage::kInput ? in.input_column : in.alias_input;
    if (column >= 0 && !in.spec.ragged && !out.views && in.spec.name == out.spec.name &&
        in.row_bytes == out.row_bytes) {
      out.alias_input = column;
      out.alias_from = in_values[0];
    }
  }
  if (!op.view) {
    steps_.push_back(Step{op.name, OpContext(op), op_index, op.op_key, op.kernel.get(), in_values, out_values});
    steps_.back().plugin = !op.plugin.empty();
  }
}

void MapPlan::CheckAliases() {
  // The step writing each value, and whether a value is read after step k.
  std::vector<int> writer(values_.size(), -1);
  for (size_t k = 0; k < steps_.size(); ++k) {
    for (int out : steps_[k].outputs) writer[out] = static_cast<int>(k);
  }
  auto read_after = [&](int value, int step) {
    for (size_t k = step + 1; k < steps_.size(); ++k) {
      for (int in : steps_[k].inputs) {
        if (in == value) return true;
      }
    }
    return false;
  };
  auto final_column = [&](int value) {
    for (const OutputColumn& oc : outputs_) {
      if (oc.value == value) return true;
    }
    return false;
  };
  std::vector<bool> live(values_.size(), false);
  for (size_t id = 0; id < values_.size(); ++id) {
    const Value& last = values_[id];
    if (last.alias_input < 0 || last.storage != Storage::kOutput || backend_ != ops::Backend::kCpu) continue;
    // Walk the chain back to the input column: every value it overwrites
    // must be read by no later step and be no final column.
    bool safe = true;
    std::vector<int> chain;
    for (int v = static_cast<int>(id); v >= 0 && values_[v].alias_input >= 0; v = values_[v].alias_from) {
      chain.push_back(v);
      const int from = values_[v].alias_from;
      safe = safe && !read_after(from, writer[v]) && !final_column(from);
    }
    if (!safe) continue;
    for (int v : chain) {
      live[v] = true;
      values_[v].alias_slot = last.output_slot;
    }
  }
  for (size_t id = 0; id < values_.size(); ++id) {
    if (!live[id]) values_[id].alias_input = values_[id].alias_from = values_[id].alias_slot = -1;
  }
}

bool MapPlan::Aliased(const Value& v, const Batch& in, const std::vector<Tensor>& outputs) const {
  return v.alias_input >= 0 && outputs[v.alias_slot].raw_data() == in.columns[v.alias_input].values.raw_data();
}

// Final columns: produced values go to output storage; input values are
// aliased. Everything else is scratch.
void MapPlan::AssignFinalColumns() {
  std::vector<ColumnSpec> out_specs;
  for (const auto& [spec, value] : columns_) {
    Value& v = values_[value];
    if (v.storage == Storage::kScratch) {
      v.storage = Storage::kOutput;
      v.output_slot = static_cast<int>(output_slot_values_.size());
      output_slot_values_.push_back(value);
    }
    outputs_.push_back(OutputColumn{value, spec});
    out_specs.push_back(spec);
  }
  output_schema_ = Schema(std::move(out_specs));
  columns_.clear();
}

void MapPlan::SizeTiles() {
  int64_t scratch_row_bytes = 0;
  for (const Value& v : values_) {
    if (v.storage == Storage::kScratch) scratch_row_bytes += v.row_bytes;
  }
  tile_rows_ = scratch_row_bytes == 0 ? kMaxTileRows
                                      : std::clamp<int64_t>(kScratchBudgetBytes / scratch_row_bytes, 1, kMaxTileRows);
  if (whole_ranges_) {
    range_tile_rows_ = scratch_row_bytes == 0 ? std::numeric_limits<int64_t>::max()
                                              : std::max(tile_rows_, kWholeRangeScratchBytes / scratch_row_bytes);
  }
}

void MapPlan::FindWrittenOnce() {
  std::vector<bool> read_later(values_.size(), false);
  for (auto step = steps_.rbegin(); step != steps_.rend(); ++step) {
    bool once = true;
    int64_t bytes = 0;
    for (int v : step->outputs) {
      const Value& value = values_[v];
      once = once && value.storage == Storage::kOutput && value.alias_input < 0 && !read_later[v];
      bytes += value.row_bytes;
    }
    step->written_once_row_bytes = once ? bytes : 0;
    for (int v : step->inputs) read_later[v] = true;
  }
}

absl::StatusOr<std::vector<Tensor>> MapPlan::AllocateOutputs(const Batch& in, BufferPool* pool,
                                                             int64_t room_rows) const {
  const int64_t rows = in.rows;
  const int64_t room = std::max(rows, room_rows);
  std::vector<Tensor> outputs;
  outputs.reserve(output_slot_values_.size());
  void* stream = nullptr;
  if (runtime_ != nullptr) {
    SLUICE_ASSIGN_OR_RETURN(stream, runtime_->ThreadStream(device_));
  }
  for (int value : output_slot_values_) {
    const Value& v = values_[value];
    if (runtime_ != nullptr) {
      SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> buffer,
                              runtime_->Allocate(static_cast<size_t>(v.row_bytes * rows), device_, stream));
      outputs.emplace_back(v.spec.dtype, v.spec.shape.WithLeading(rows), std::move(buffer));
      continue;
    }
    if (v.alias_input >= 0) {
      // The input's buffer when the batch's column is its only holder and
      // starts it, and it is the pool's: the op then runs in place. Memory
      // adopted from elsewhere (a source's arrays, a mapped file) is never
      // written.
      const Tensor& t = in.columns[v.alias_input].values;
      if (t.buffer() != nullptr && t.buffer().use_count() == 1 && t.buffer()->owner() == nullptr &&
          t.raw_data() == t.buffer()->data() && t.byte_size() == static_cast<size_t>(v.row_bytes * rows)) {
        outputs.emplace_back(v.spec.dtype, v.spec.shape.WithLeading(rows), t.buffer());
        continue;
      }
    }
    std::shared_ptr<Buffer> block = pool->Allocate(static_cast<size_t>(v.row_bytes * room));
    outputs.push_back(v.views ? Tensor(DType::kUInt8, Shape{rows, v.row_bytes}, std::move(block))
                              : Tensor(v.spec.dtype, v.spec.shape.WithLeading(rows), std::move(block)));
  }
  return outputs;
}

std::vector<size_t> MapPlan::OutputBytes(int64_t rows) const {
  std::vector<size_t> bytes;
  for (int value : output_slot_values_) bytes.push_back(values_[value].row_bytes * rows);
  return bytes;
}

int64_t MapPlan::ChunkBlockBytes(int64_t rows) const {
  int64_t bytes = 0;
  for (size_t b : OutputBytes(rows)) bytes += static_cast<int64_t>(BufferPool::BlockBytes(b));
  return bytes;
}

ops::ColumnRef MapPlan::Ref(int value, const Batch& in, int64_t row0, const Bases& bases, int64_t in_tile) const {
  const Value& v = values_[value];
  ops::ColumnRef r;
  r.row_bytes = v.row_bytes;
  if (v.storage == Storage::kInput && in.columns[v.input_column].ragged()) {
    r.ragged = &in.columns[v.input_column];
    r.ragged_row = row0 + in_tile;
    return r;
  }
  // Scratch holds one tile, from its first row; the rest hold the chunk.
  r.data = (v.storage == Storage::kScratch ? bases[value] : bases[value] + row0 * v.row_bytes) + in_tile * v.row_bytes;
  if (v.views) r.views = reinterpret_cast<absl::string_view*>(r.data);
  return r;
}

ops::KernelContext MapPlan::TileContext(const Batch& in, int64_t row0, int64_t rows, const RunArgs& args) const {
  ops::KernelContext ctx;
  ctx.backend = backend_;
  ctx.device = device_;
  ctx.rows = rows;
  ctx.first_sample = args.first_sample + row0;
  ctx.seed = args.seed;
  ctx.epoch = args.epoch;
  ctx.provenance = &in.provenance;
  ctx.provenance_row = row0;
  ctx.cancelled = args.cancelled;
  ctx.core = args.core;
  ctx.progress = args.progress;
  return ctx;
}

absl::Status MapPlan::RunTile(const Batch& in, int64_t row0, const Bases& bases, ops::KernelContext& ctx,
                              const RunArgs& args, absl::InlinedVector<int64_t, 16>* step_ns) const {
  absl::InlinedVector<ops::ColumnRef, 8> ins, outs;
  const bool timed = !step_ns->empty();
  // One clock read per step and tile: a step ends where the next begins.
  int64_t start = timed ? NowNs() : 0;
  for (size_t k = 0; k < steps_.size(); ++k) {
    const Step& step = steps_[k];
    ins.clear();
    outs.clear();
    for (int v : step.inputs) ins.push_back(Ref(v, in, row0, bases));
    for (int v : step.outputs) outs.push_back(Ref(v, in, row0, bases));
    ctx.op_key = step.op_key;
    ctx.bypass_cache = backend_ == ops::Backend::kCpu && step.written_once_row_bytes * in.rows >= kCacheBypassBytes;
    absl::Status s = ops::Guarded(kKernel, [&] { return step.kernel->Run(ctx, ins, outs); });
    if (timed) {
      const int64_t stop = NowNs();
      (*step_ns)[k] += stop - start;
      if (args.trace) args.trace->Span("op", step.name, start, stop);
      start = stop;
    }
    if (s.ok()) continue;
    // A plugin's errors, and a C++ exception (std::bad_alloc), say what went
    // wrong but not where; the built-in kernels' errors name the sample.
    const bool unnamed = step.plugin || absl::StartsWith(s.message(), absl::StrCat(kKernel, " threw"));
    return WithContext(unnamed ? NameTheRow(step, s, in, row0, bases, ctx) : s, step.context);
  }
  return absl::OkStatus();
}

absl::Status MapPlan::NameTheRow(const Step& step, const absl::Status& failed, const Batch& in, int64_t row0,
                                 const Bases& bases, const ops::KernelContext& ctx) const {
  if (ctx.rows == 1) return Naming(failed, ctx.Where(0));
  if (backend_ != ops::Backend::kCpu) return failed;  // a device's run is queued whole
  absl::InlinedVector<ops::ColumnRef, 8> ins, outs;
  for (int64_t r = 0; r < ctx.rows; ++r) {
    ops::KernelContext one = ctx;
    one.rows = 1;
    one.first_sample = ctx.first_sample + r;
    one.provenance_row = ctx.provenance_row + r;
    ins.clear();
    outs.clear();
    for (int v : step.inputs) ins.push_back(Ref(v, in, row0, bases, r));
    for (int v : step.outputs) outs.push_back(Ref(v, in, row0, bases, r));
    const absl::Status row = ops::Guarded(kKernel, [&] { return step.kernel->Run(one, ins, outs); });
    if (!row.ok()) return Naming(row, one.Where(0));
  }
  return absl::Status(failed.code(), absl::StrCat(failed.message(), " (on rows ", ctx.Where(0), " to ",
                                                  ctx.Where(ctx.rows - 1), ", and on none of them alone)"));
}

absl::Status MapPlan::RunRows(const Batch& in, int64_t begin, int64_t end, const RunArgs& args,
                              const std::vector<Tensor>& outputs) const {
  // Per step, summed here and added to the shared counters once per call:
  // runners share those cache lines.
  const bool timed = args.op_ns != nullptr || args.trace != nullptr;
  absl::InlinedVector<int64_t, 16> step_ns(timed ? steps_.size() : 0, 0);
  absl::Status status;
  if (backend_ != ops::Backend::kCpu) {
    status = RunOnDevice(in, args, outputs, &step_ns);
  } else {
    const int64_t tile = whole_chunks_   ? std::max<int64_t>(end - begin, 1)
                         : whole_ranges_ ? std::clamp<int64_t>(end - begin, 1, range_tile_rows_)
                                         : tile_rows_;
    // Each scratch value gets an aligned region of `tile` rows.
    Bases bases(values_.size(), nullptr);
    int64_t scratch_bytes = 0;
    absl::InlinedVector<int64_t, 16> scratch_offset(values_.size(), 0);
    for (size_t i = 0; i < values_.size(); ++i) {
      const Value& v = values_[i];
      if (v.storage != Storage::kScratch) continue;
      if (Aliased(v, in, outputs)) {  // a chain of in-place ops: the input's buffer, whole chunks
        bases[i] = in.columns[v.alias_input].values.raw_data();
        continue;
      }
      scratch_offset[i] = scratch_bytes;
      scratch_bytes += AlignUp(v.row_bytes * tile);
    }
    if (static_cast<int64_t>(tls_scratch.size()) < scratch_bytes) tls_scratch.resize(scratch_bytes);
    for (size_t i = 0; i < values_.size(); ++i) {
      const Value& v = values_[i];
      if (v.storage == Storage::kScratch && bases[i] == nullptr) bases[i] = tls_scratch.data() + scratch_offset[i];
      if (v.storage == Storage::kOutput) bases[i] = outputs[v.output_slot].raw_data();
      if (v.storage == Storage::kInput) bases[i] = in.columns[v.input_column].values.raw_data();
    }
    for (int64_t row0 = begin; row0 < end && status.ok(); row0 += tile) {
      ops::KernelContext ctx = TileContext(in, row0, std::min(tile, end - row0), args);
      status = RunTile(in, row0, bases, ctx, args, &step_ns);
    }
  }
  if (args.op_ns != nullptr) {
    for (size_t k = 0; k < steps_.size(); ++k) {
      (*args.op_ns)[steps_[k].op_index].fetch_add(step_ns[k], std::memory_order_relaxed);
    }
  }
  return status;
}

absl::Status MapPlan::RunOnDevice(const Batch& in, const RunArgs& args, const std::vector<Tensor>& outputs,
                                  absl::InlinedVector<int64_t, 16>* step_ns) const {
  SLUICE_ASSIGN_OR_RETURN(void* stream, runtime_->ThreadStream(device_));
  // Device copies of host inputs and the scratch values go back to the pool
  // in stream order when `device_temporaries` goes; the host memory the
  // copies read is held until they are done.
  std::vector<std::shared_ptr<Buffer>> device_temporaries, host_sources;
  std::vector<bool> read(values_.size(), false);
  for (const Step& step : steps_) {
    for (int v : step.inputs) read[v] = true;
  }
  Bases bases(values_.size(), nullptr);
  for (size_t i = 0; i < values_.size(); ++i) {
    const Value& v = values_[i];
    const size_t bytes = static_cast<size_t>(v.row_bytes * in.rows);
    if (v.storage == Storage::kOutput) {
      bases[i] = outputs[v.output_slot].raw_data();
    } else if (v.storage == Storage::kScratch) {
      SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> b, runtime_->Allocate(bytes, device_, stream));
      bases[i] = b->data();
      device_temporaries.push_back(std::move(b));
    } else if (read[i]) {
      const Column& c = in.columns[v.input_column];
      if (c.ragged()) {
        // Variable-length bytes stay on the host, where a device kernel
        // that takes them (a decoder) reads them, possibly by DMA after
        // the run: they are held as the copies' sources are.
        host_sources.push_back(c.values.buffer());
        continue;
      }
      if (c.values.memory_kind() == MemoryKind::kDevice) {
        bases[i] = c.values.raw_data();
        continue;
      }
      std::shared_ptr<Buffer> source = c.values.buffer();
      const uint8_t* host = c.values.raw_data();
      if (c.values.memory_kind() != MemoryKind::kPinnedHost) {
        // Pageable memory would make the copy synchronous: stage it in
        // page-locked memory, so the copy overlaps the next batch's work.
        source = runtime_->StagingPool()->Allocate(bytes);
        std::memcpy(source->data(), host, bytes);
        host = source->data();
      }
      SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> b, runtime_->Allocate(bytes, device_, stream));
      SLUICE_RETURN_IF_ERROR(runtime_->CopyToDevice(b->data(), host, bytes, stream));
      bases[i] = b->data();
      device_temporaries.push_back(std::move(b));
      host_sources.push_back(std::move(source));
    }
  }
  ops::KernelContext ctx = TileContext(in, 0, in.rows, args);
  ctx.stream = stream;
  absl::Status status = RunTile(in, 0, bases, ctx, args, step_ns);
  // Marked even after an error: the host sources must outlive the copies.
  std::vector<std::shared_ptr<Buffer>> written;
  for (const Tensor& t : outputs) written.push_back(t.buffer());
  absl::Status marked = runtime_->MarkReady(written, stream, std::move(host_sources));
  SLUICE_RETURN_IF_ERROR(status);
  return marked;
}

void MapPlan::ForgetRow(int64_t row, const std::vector<Tensor>& outputs) const {
  for (int value : output_slot_values_) {
    const Value& v = values_[value];
    if (v.views) reinterpret_cast<absl::string_view*>(outputs[v.output_slot].raw_data())[row] = absl::string_view();
  }
}

Batch MapPlan::Assemble(const Batch& in, const std::vector<Tensor>& outputs, BufferPool* pool) const {
  Batch out;
  out.rows = in.rows;
  out.provenance = in.provenance;
  for (const OutputColumn& oc : outputs_) {
    const Value& v = values_[oc.value];
    Shape shape = oc.spec.shape.WithLeading(in.rows);
    if (v.storage == Storage::kInput) {
      const Column& c = in.columns[v.input_column];
      if (c.ragged()) {
        out.columns.push_back(c);
      } else {  // aliased, possibly under a new type and shape (views)
        out.columns.push_back(Column{
            Tensor(oc.spec.dtype, std::move(shape), c.values.buffer(), c.values.raw_data() - c.values.buffer()->data()),
            Tensor()});
      }
    } else if (v.views) {
      const Tensor& t = outputs[v.output_slot];
      out.columns.push_back(GatherViews(reinterpret_cast<const absl::string_view*>(t.raw_data()), in.rows, pool));
    } else {
      const Tensor& t = outputs[v.output_slot];
      out.columns.push_back(Column{Tensor(oc.spec.dtype, std::move(shape), t.buffer()), Tensor()});
    }
  }
  return out;
}

absl::Status MapPlan::Run(const Batch& in, const RunArgs& args, Batch* out) const {
  SLUICE_ASSIGN_OR_RETURN(std::vector<Tensor> outputs, AllocateOutputs(in, args.pool));
  SLUICE_RETURN_IF_ERROR(RunRows(in, 0, in.rows, args, outputs));
  *out = Assemble(in, outputs, args.pool);
  return absl::OkStatus();
}

}  // namespace sluice::exec
