#include "sluice/exec/pipeline.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "sluice/core/heap_reuse.h"
#include "sluice/core/mutex_checks.h"
#include "sluice/core/python_process.h"
#include "sluice/core/rng.h"
#include "sluice/core/status_macros.h"
#include "sluice/exec/map_plan.h"
#include "sluice/exec/memory_minimum.h"
#include "sluice/io/arrow_source.h"
#include "sluice/io/object_store.h"
#include "sluice/ops/device_runtime.h"
#include "sluice/ops/framework/guarded_call.h"
#include "sluice/ops/plugin.h"

namespace sluice::exec {
namespace {

// Chunk size for pipelines without a batch node (a service worker's part
// before the distribute node): large enough to amortize per-chunk work,
// small enough to keep the first sample quick; fewer rows where a chunk
// of 128 would pass kChunkTargetBytes, so that a map's chunk of large rows
// (4 MiB each: 512 MiB) does not set the pipeline's memory minimum.
constexpr int64_t kDefaultChunkRows = 128;
constexpr int64_t kChunkTargetBytes = int64_t{4} << 20;

// How often the autotuner measures and may change a setting, and the
// deepest prefetch it tries.
constexpr int64_t kAutotuneIntervalNs = 100'000'000;
constexpr int64_t kMaxAutotunedDepth = 16;

// Whether the prefetch node at `i` is left out: a remote input before it
// reads ahead on threads of its own (the service's client: max_outstanding
// batches per worker stream), and another thread would only add a hand-off
// per batch.
bool PrefetchAfterRemote(const std::vector<graph::CompiledNode>& nodes, size_t i) {
  return nodes[i].kind == graph::NodeKind::kPrefetch && nodes[i - 1].kind == graph::NodeKind::kRemote;
}

// Counts a node's elements and the time its callers spend in GetNext; of a
// source's, also the part off the CPU.
class CountingIterator : public Iterator {
 public:
  CountingIterator(std::unique_ptr<Iterator> inner, NodeStats* stats, const ExecContext* ctx, absl::string_view name,
                   bool source)
      : inner_(std::move(inner)), stats_(stats), ctx_(ctx), name_(name), source_(source) {}

  absl::Status GetNext(Batch* out, bool* end) override {
    const int64_t start = NowNs();
    const int64_t cpu_start = source_ ? ThreadCpuNs() : 0;
    absl::Status s = inner_->GetNext(out, end);
    const int64_t stop = NowNs();
    stats_->get_next_ns.fetch_add(stop - start, std::memory_order_relaxed);
    if (source_) {
      const int64_t off_cpu = (stop - start) - (ThreadCpuNs() - cpu_start);
      stats_->off_cpu_ns.fetch_add(std::max<int64_t>(0, off_cpu), std::memory_order_relaxed);
    }
    if (TraceBuffer* trace = ctx_->trace.load(std::memory_order_relaxed)) trace->Span("node", name_, start, stop);
    if (s.ok() && !*end) {
      stats_->elements.fetch_add(1, std::memory_order_relaxed);
      stats_->rows.fetch_add(out->rows, std::memory_order_relaxed);
      stats_->bytes.fetch_add(static_cast<int64_t>(out->ByteSize()), std::memory_order_relaxed);
    }
    return s;
  }
  void LimitNextRows(int64_t rows) override { inner_->LimitNextRows(rows); }

 private:
  std::unique_ptr<Iterator> inner_;
  NodeStats* stats_;
  const ExecContext* ctx_;
  absl::string_view name_;  // the compiled node's
  bool source_;
};

}  // namespace

PipelineIterator::~PipelineIterator() {
  ctx_->cancel.Cancel();
  root_.reset();
  if (!ends_epoch_) return;
  GiveBackUnused(ctx_->pool);
  for (BufferPool* staging : ctx_->staging_pools) GiveBackUnused(staging);
  io::TrimColumnar();
}

namespace {

bool ReadOnly(const Tensor& t) { return t.buffer() != nullptr && t.buffer()->read_only(); }

// A ragged column's own rows: the bytes its offsets span (a view may hold a
// whole row group's values), with offsets from 0.
Column CopiedRagged(const Column& c, BufferPool* pool) {
  const int64_t rows = c.offsets.num_elements() - 1;
  const int64_t* off = c.offsets.data<int64_t>();
  Column copy{Tensor::Allocate(c.values.dtype(), Shape{off[rows] - off[0]}, pool),
              Tensor::Allocate(DType::kInt64, Shape{rows + 1}, pool)};
  std::memcpy(copy.values.raw_data(), c.values.raw_data() + off[0], static_cast<size_t>(off[rows] - off[0]));
  int64_t* rebased = copy.offsets.data<int64_t>();
  for (int64_t r = 0; r <= rows; ++r) rebased[r] = off[r] - off[0];
  return copy;
}

// Columns viewing read-only memory (a mapped file, a source's arrays) are
// copied out of it: the consumer owns what it gets and may write it (numpy
// arrays from the Python front are writable views of the batch).
void CopyReadOnlyColumns(Batch* batch, BufferPool* pool) {
  for (Column& c : batch->columns) {
    if (c.ragged()) {
      if (ReadOnly(c.values) || ReadOnly(c.offsets)) c = CopiedRagged(c, pool);
      continue;
    }
    if (!ReadOnly(c.values)) continue;
    Tensor copy = Tensor::Allocate(c.values.dtype(), c.values.shape(), pool);
    std::memcpy(copy.raw_data(), c.values.raw_data(), c.values.byte_size());
    c.values = std::move(copy);
  }
}

}  // namespace

absl::Status PipelineIterator::Next(Batch* out, bool* end) { return Take(out, end, 0); }

absl::Status PipelineIterator::NextRows(Batch* out, bool* end, size_t max_bytes) {
  return Take(out, end, std::max<size_t>(max_bytes, 1));
}

absl::Status PipelineIterator::Take(Batch* out, bool* end, size_t max_rows_bytes) {
  if (absl::Status failed = ctx_->failure.Get(); !failed.ok()) return failed;
  const int64_t start = ctx_->stats == nullptr ? 0 : NowNs();
  absl::Status s = NextElement(out, end, max_rows_bytes);
  // A failed epoch stays failed: the nodes are past the rows that failed
  // (a next() after a caught error gave a batch stitched around them).
  if (!s.ok()) ctx_->failure.Set(s);
  if (s.ok() && !*end) CopyReadOnlyColumns(out, ctx_->pool);
  if (max_rows_bytes > 0 && !batched_ && position_status_.ok()) {  // the tracker counts samples one by one
    position_status_ = absl::FailedPreconditionError("an iterator read in chunks (NextRows) saves no position");
  }
  if (s.ok() && !*end && position_status_.ok()) {
    position_status_ = tracker_->Delivered(*out);
    // A position lost stays lost: the shuffle need not log for it.
    if (!position_status_.ok() && ctx_->shuffle_log != nullptr) ctx_->shuffle_log->Stop();
  }
  if (ctx_->stats == nullptr) return s;
  const int64_t stop = NowNs();
  if (s.ok() && !*end) ctx_->stats->CountConsumerWait(stop - start);
  if (TraceBuffer* trace = ctx_->trace.load(std::memory_order_relaxed)) trace->Span("consumer", "next()", start, stop);
  return s;
}

absl::StatusOr<std::string> PipelineIterator::SaveState() const {
  if (!position_status_.ok()) return position_status_;
  return SerializeState(fingerprint_, tracker_->Position(), listing_);
}

// An element without rows (a chunk whose every row a skipping map refused;
// the batch node after such a map still sees it, to keep a shard's ranks
// in step) is no element: handed on, it was an empty batch, or a sample
// read past its chunk's end.
absl::Status PipelineIterator::NextElement(Batch* out, bool* end, size_t max_rows_bytes) {
  if (batched_) {
    while (true) {
      SLUICE_RETURN_IF_ERROR(root_->GetNext(out, end));
      if (*end || out->rows > 0) return absl::OkStatus();
      // Left out, this rank would take a step fewer than the others.
      if (ctx_->shard_log != nullptr) {
        return absl::DataLossError(
            "every row of a batch of this shard was skipped as corrupt by a map under on_corrupt \"skip\" after "
            "the batch: this rank cannot keep step with the others (a map before the batch leaves a short batch)");
      }
    }
  }
  while (next_row_ >= chunk_.rows) {
    SLUICE_RETURN_IF_ERROR(root_->GetNext(&chunk_, end));
    next_row_ = 0;
    if (*end) return absl::OkStatus();
  }
  *end = false;
  int64_t stop = next_row_ + 1;
  if (max_rows_bytes > 0) {  // rows of about the chunk's mean size
    const size_t row_bytes = std::max<size_t>(chunk_.ByteSize() / static_cast<size_t>(chunk_.rows), 1);
    stop = std::min(chunk_.rows, next_row_ + std::max<int64_t>(static_cast<int64_t>(max_rows_bytes / row_bytes), 1));
  }
  *out = chunk_.Slice(next_row_, stop);
  next_row_ = stop;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Pipeline>> Pipeline::Create(const PipelineDef& def) {
  return Create(def, graph::CompileRange{}, nullptr);
}

absl::StatusOr<std::unique_ptr<Pipeline>> Pipeline::Create(const PipelineDef& def, const graph::CompileRange& range,
                                                           std::shared_ptr<RemoteInput> remote) {
  SLUICE_ASSIGN_OR_RETURN(graph::CompiledPipeline compiled, graph::Compile(def, ops::OpRegistry::Global(), range));
  if ((compiled.nodes.front().kind == graph::NodeKind::kRemote) != (remote != nullptr)) {
    return absl::InvalidArgumentError(remote ? "a remote input needs a pipeline part that starts at its distribute node"
                                             : "a distribute node needs the service's remote input");
  }
  return Make(std::move(compiled), std::move(remote));
}

absl::StatusOr<std::unique_ptr<Pipeline>> Pipeline::FromCompiled(graph::CompiledPipeline compiled) {
  if (compiled.nodes.empty() || compiled.nodes.front().kind == graph::NodeKind::kRemote) {
    return absl::InvalidArgumentError("a compiled pipeline to run in-process must start at a source");
  }
  return Make(std::move(compiled), nullptr);
}

absl::StatusOr<std::unique_ptr<Pipeline>> Pipeline::Make(graph::CompiledPipeline compiled,
                                                         std::shared_ptr<RemoteInput> remote) {
  SLUICE_RETURN_IF_ERROR(PrepareKernels(&compiled));
  const int64_t chunk_rows = ChunkRows(compiled);
  std::vector<BufferPool*> output_pools = OutputPools(compiled);
  const MemoryMinimum minimum = MeasureMemoryMinimum(compiled, chunk_rows, output_pools);
  SLUICE_RETURN_IF_ERROR(FitDefaultMemoryBudget(minimum, &compiled));
  SLUICE_RETURN_IF_ERROR(CheckMemoryBudget(compiled, minimum));
  std::unique_ptr<Pipeline> pipeline(
      new Pipeline(std::move(compiled), std::move(remote), chunk_rows, std::move(output_pools)));
  pipeline->ReserveWorkingSet();
  ReuseFreedHeapMemory();
  SkipDebugDeadlockChecks();
  return pipeline;
}

absl::Status PrepareKernels(graph::CompiledPipeline* compiled) {
  const ops::OpRegistry& registry = compiled->registry ? *compiled->registry : ops::OpRegistry::Global();
  const std::vector<std::string> plugins = ops::LoadedPlugins();
  compiled->registry = &registry;
  for (graph::CompiledNode& node : compiled->nodes) {
    const std::string where = absl::StrCat("node '", node.name, "'");
    ops::SetupContext setup{node.backend, -1};
    if (node.backend != ops::Backend::kCpu) {
      ops::DeviceRuntime* runtime = registry.runtime(node.backend);
      if (runtime == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": no ", ops::BackendName(node.backend), " runtime"));
      }
      SLUICE_RETURN_IF_ERROR(WithContext(runtime->CheckAvailable(),
                                         absl::StrCat(where, ": device \"", ops::BackendName(node.backend), "\"")));
      setup.device = node.device = runtime->CurrentDevice();
    }
    for (graph::BoundOp& op : node.ops) {
      if (op.view || op.kernel != nullptr) continue;
      absl::StatusOr<std::unique_ptr<ops::Kernel>> kernel = registry.MakeKernel(op.op, node.backend, op.inferred);
      if (!kernel.ok()) return WithContext(kernel.status(), where);
      // A loaded plugin registers under its path; ops registered in code
      // (by a C++ trainer, or the tests) under a name of their own.
      const std::string registrant = registry.Registrant(op.op);
      if (std::find(plugins.begin(), plugins.end(), registrant) != plugins.end()) op.plugin = registrant;
      absl::Status s = ops::Guarded("its kernel", [&] { return (*kernel)->Setup(setup); });
      if (!s.ok()) return WithContext(s, absl::StrCat(where, ": ", exec::OpContext(op), ": setup"));
      op.kernel = std::move(*kernel);
    }
  }
  return absl::OkStatus();
}

// The map nodes' output buffers are the bulk of a pipeline's memory. At its
// busiest a map node holds its own in-flight chunks (parallelism + 1), the
// next map node holds as many as inputs, a prefetch after it its depth plus
// one in transit, and the consumer one. A page-locked staging pool (for a
// device map) keeps that many once they are used, so the footprint of the
// first epoch is that of the whole run; nothing is allocated or touched
// before the pipeline runs. The pipeline's own pool needs no such count:
// it caches whatever the memory budget leaves room for.
void Pipeline::ReserveWorkingSet() const {
  const std::vector<graph::CompiledNode>& nodes = run_.nodes;
  auto parallelism = [&](const graph::CompiledNode& n) {
    return n.parallelism > 0 ? n.parallelism : compiled_.threads;
  };
  for (size_t i = 0; i < nodes.size(); ++i) {
    // Device maps' outputs are device memory, not a pool's.
    if (nodes[i].kind != graph::NodeKind::kMap || nodes[i].backend != ops::Backend::kCpu) continue;
    if (output_pools_[i] == nullptr) continue;
    int copies = parallelism(nodes[i]) + 1 + 1;
    for (size_t j = i + 1; j < nodes.size(); ++j) {
      // A batch passes chunks through; a map run before it holds none.
      if (nodes[j].kind == graph::NodeKind::kBatch || run_.runs_before_batch[j]) continue;
      if (nodes[j].kind == graph::NodeKind::kMap) copies += parallelism(nodes[j]) + 1;
      if (nodes[j].kind == graph::NodeKind::kPrefetch) copies += static_cast<int>(nodes[j].count) + 1;
      break;
    }
    const std::unique_ptr<MapPlan> plan = MapPlan::Make(nodes[i]);
    for (size_t bytes : plan->OutputBytes(chunk_rows_)) output_pools_[i]->KeepCached(bytes, copies);
  }
}

Pipeline::Pipeline(graph::CompiledPipeline compiled, std::shared_ptr<RemoteInput> remote, int64_t chunk_rows,
                   std::vector<BufferPool*> output_pools)
    : compiled_(std::move(compiled)),
      run_(PlanRun(compiled_)),
      remote_(std::move(remote)),
      chunk_rows_(chunk_rows),
      output_pools_(std::move(output_pools)),
      object_block_limit_(compiled_.memory_budget_bytes / io::ObjectBlockLimit::kBudgetShare) {
  BufferPool::Options pool;
  pool.max_cached_bytes = pool.max_held_bytes = static_cast<size_t>(compiled_.memory_budget_bytes);
  pool_ = std::make_shared<BufferPool>(pool);
  if (remote_ != nullptr) {
    // The service client's rings take at most half the budget, and the
    // pool caches what they leave of it.
    const int64_t budget = compiled_.memory_budget_bytes;
    remote_->LimitHeldBytes(budget / 2, [pool = std::weak_ptr<BufferPool>(pool_), budget](int64_t held) {
      if (auto p = pool.lock()) p->LimitHeld(static_cast<size_t>(std::max<int64_t>(1, budget - held)));
    });
  }
  for (BufferPool* p : output_pools_) {
    if (p != nullptr && std::find(staging_pools_.begin(), staging_pools_.end(), p) == staging_pools_.end()) {
      staging_pools_.push_back(p);
    }
  }
}

int64_t Pipeline::staging_bytes() const {
  int64_t bytes = 0;
  for (const BufferPool* p : staging_pools_) {
    const BufferPool::Stats stats = p->stats();
    bytes += static_cast<int64_t>(stats.live_bytes + stats.cached_bytes);
  }
  return bytes;
}

// A device map copies its input batches to the device asynchronously only
// from page-locked memory; from pageable memory it would first copy them
// into its staging buffers. So the nodes whose buffers reach a device map
// write page-locked memory from the start: back from the map through the
// nodes that pass chunks on (batch, prefetch, take, repeat) or only view
// them (maps of views), to the first that writes every column anew.
// Sources cut chunks of the batch size, so batches pass through with no copy
// when nothing in between changes row counts.
int64_t Pipeline::ChunkRows(const graph::CompiledPipeline& compiled) {
  int64_t batch = 0, row_bytes = 0;
  for (const graph::CompiledNode& node : compiled.nodes) {
    if (node.kind == graph::NodeKind::kBatch) batch = node.count;
    row_bytes = std::max(row_bytes, node.output_schema.RowBytes());
  }
  if (batch > 0) return batch;
  return std::clamp<int64_t>(kChunkTargetBytes / std::max<int64_t>(row_bytes, 1), 1, kDefaultChunkRows);
}

std::vector<BufferPool*> Pipeline::OutputPools(const graph::CompiledPipeline& compiled) {
  const std::vector<graph::CompiledNode>& nodes = compiled.nodes;
  std::vector<BufferPool*> pools(nodes.size(), nullptr);
  for (size_t k = 0; k < nodes.size(); ++k) {
    if (nodes[k].kind != graph::NodeKind::kMap || nodes[k].backend == ops::Backend::kCpu) continue;
    ops::DeviceRuntime* runtime = compiled.registry->runtime(nodes[k].backend);
    if (runtime == nullptr) continue;
    for (size_t j = k; j-- > 0;) {
      const graph::CompiledNode& n = nodes[j];
      if (n.kind == graph::NodeKind::kMap && n.backend != ops::Backend::kCpu) break;
      if (n.kind == graph::NodeKind::kRemote) break;  // the client's receive buffers
      pools[j] = runtime->StagingPool();
      const bool views_only = std::all_of(n.ops.begin(), n.ops.end(), [](const graph::BoundOp& op) { return op.view; });
      const bool passes_on = n.kind == graph::NodeKind::kBatch || n.kind == graph::NodeKind::kPrefetch ||
                             n.kind == graph::NodeKind::kTake || n.kind == graph::NodeKind::kRepeat ||
                             (n.kind == graph::NodeKind::kMap && views_only);
      if (!passes_on) break;
    }
  }
  return pools;
}

std::unique_ptr<Iterator> Pipeline::MakeIterator(ExecContext* ctx, size_t index, uint64_t epoch,
                                                 int64_t first_chunk_rows) const {
  std::unique_ptr<Iterator> it = MakeNodeIterator(ctx, index, epoch, first_chunk_rows);
  if (ctx->stats == nullptr) return it;
  return std::make_unique<CountingIterator>(std::move(it), ctx->stats->node(index), ctx, compiled_.nodes[index].name,
                                            compiled_.nodes[index].kind == graph::NodeKind::kSource);
}

std::unique_ptr<Iterator> Pipeline::MakeNodeIterator(ExecContext* ctx, size_t index, uint64_t epoch,
                                                     int64_t first_chunk_rows) const {
  // Its ops run in the map before the batch that is its input.
  if (run_.runs_before_batch[index]) return MakeIterator(ctx, index - 1, epoch, first_chunk_rows);
  const graph::CompiledNode& node = run_.nodes[index];
  NodeStats* stats = ctx->stats ? ctx->stats->node(index) : nullptr;
  IteratorArgs args{ctx, &node, epoch, chunk_rows_, 0, stats, ctx->knobs[index].get()};
  args.first_chunk_rows = first_chunk_rows;
  args.pool = output_pools_[index];
  if (node.kind == graph::NodeKind::kSource) return MakeSourceIterator(args);
  if (node.kind == graph::NodeKind::kRemote) return remote_->Open(ctx, node, epoch);
  if (node.kind == graph::NodeKind::kRepeat) {
    return MakeRepeatIterator(
        args, [this, ctx, index](uint64_t e, int64_t first) { return MakeIterator(ctx, index - 1, e, first); });
  }
  // Maps and prefetches keep their input's chunks: the hint passes through.
  const bool keeps_chunks = node.kind == graph::NodeKind::kMap || node.kind == graph::NodeKind::kPrefetch;
  const int64_t input_first_chunk_rows = keeps_chunks ? first_chunk_rows : 0;
  if (FoldsIntoMap(index)) {
    const graph::CompiledNode& map = run_.nodes[index - 1];
    NodeStats* map_stats = ctx->stats ? ctx->stats->node(index - 1) : nullptr;
    IteratorArgs map_args{ctx, &map, epoch, chunk_rows_, node.count, map_stats, ctx->knobs[index - 1].get()};
    map_args.pool = output_pools_[index - 1];
    std::unique_ptr<Iterator> it =
        MakeMapIterator(map_args, MakeIterator(ctx, index - 2, epoch, input_first_chunk_rows));
    if (map_stats == nullptr) return it;
    return std::make_unique<CountingIterator>(std::move(it), map_stats, ctx, map.name, /*source=*/false);
  }
  std::unique_ptr<Iterator> input = MakeIterator(ctx, index - 1, epoch, input_first_chunk_rows);
  switch (node.kind) {
    case graph::NodeKind::kMap:
      return MakeMapIterator(args, std::move(input));
    case graph::NodeKind::kFilter:
      return MakeFilterIterator(args, std::move(input));
    case graph::NodeKind::kShuffle:
      return MakeShuffleIterator(args, std::move(input));
    case graph::NodeKind::kBatch:
      return MakeBatchIterator(args, std::move(input));
    case graph::NodeKind::kPrefetch:
      if (PrefetchAfterRemote(compiled_.nodes, index)) return input;
      return MakePrefetchIterator(args, std::move(input));
    case graph::NodeKind::kTake:
      return MakeTakeIterator(args, std::move(input));
    case graph::NodeKind::kShard:
      return MakeShardIterator(args, std::move(input));
    case graph::NodeKind::kSource:
    case graph::NodeKind::kRepeat:
    case graph::NodeKind::kRemote:
      break;
  }
  return input;
}

int64_t Pipeline::Cardinality() const {
  absl::StatusOr<int64_t> n = Length();
  return n.ok() ? *n : kUnknown;
}

absl::StatusOr<int64_t> Pipeline::Length() const {
  int64_t n = kUnknown;
  for (const graph::CompiledNode& node : compiled_.nodes) {
    switch (node.kind) {
      case graph::NodeKind::kSource:
        n = 0;
        for (const io::Split& split : node.format->MakeSplits()) {
          const int64_t records = node.format->CountRecords(split);
          if (records < 0) return kUnknown;  // an unindexed TFRecord, a tar shard
          n += records;
        }
        break;
      case graph::NodeKind::kRemote:
        n = remote_->Cardinality();
        break;
      case graph::NodeKind::kFilter:
        n = kUnknown;
        break;
      case graph::NodeKind::kBatch:
        if (n >= 0) n = node.drop_remainder ? n / node.count : (n + node.count - 1) / node.count;
        break;
      case graph::NodeKind::kRepeat:
        if (n > 0) n = node.count > 0 ? n * node.count : kInfinite;
        break;
      case graph::NodeKind::kTake:
        if (n >= 0 || n == kInfinite) n = n == kInfinite ? node.count : std::min(n, node.count);
        break;
      case graph::NodeKind::kShard:
        if (n < 0) break;
        SLUICE_RETURN_IF_ERROR(node.shard.CheckRows(node.name, n));
        n = node.shard.RowsOf(n);
        break;
      case graph::NodeKind::kMap:
      case graph::NodeKind::kShuffle:
      case graph::NodeKind::kPrefetch:
        break;
    }
  }
  return n;
}

std::unique_ptr<PipelineIterator> Pipeline::NewIterator(bool tune, int threads) const {
  auto ctx = std::make_unique<ExecContext>(compiled_.seed, threads > 0 ? threads : compiled_.threads,
                                           compiled_.memory_budget_bytes, compiled_.ordered, pool_);
  ctx->registry = compiled_.registry;
  if (remote_ != nullptr) ctx->memory.CountAlso([remote = remote_] { return remote->HeldBytes(); });
  ctx->memory.CountAlso(&io::ObjectBlockBytes);
  ctx->memory.CountAlso(&io::ColumnarBytes);
  ctx->memory.CountAlso(&PythonSharedBytes);
  ctx->staging_pools = staging_pools_;
  ctx->split_bytes = split_bytes_;
  for (BufferPool* staging : staging_pools_) {
    ctx->memory.CountAlso([staging] { return static_cast<int64_t>(staging->stats().live_bytes); });
  }
  ctx->skip_corrupt = !compiled_.nodes.empty() && compiled_.nodes.front().skip_corrupt;
  if (compiled_.stats) ctx->stats = std::make_unique<PipelineStats>(compiled_, run_.runs_before_batch);
  std::vector<Knob> tunable = MakeKnobs(ctx.get());
  std::unique_ptr<PipelineIterator> it(new PipelineIterator(std::move(ctx), compiled_.batched()));
  if (compiled_.autotune && !tunable.empty() && tune) {
    std::shared_ptr<SharedAutotuner> shared;
    {
      absl::MutexLock lock(&autotuner_mu_);
      if (autotuner_ == nullptr) {
        Autotuner::Options options;
        options.ram_budget_bytes = compiled_.memory_budget_bytes;
        autotuner_ = std::make_shared<SharedAutotuner>(Autotuner(std::move(tunable), options));
      }
      shared = autotuner_;
    }
    // One iterator at a time tunes; another running meanwhile keeps the
    // setting as it stands.
    if (!shared->in_use.exchange(true)) {
      std::vector<NodeKnobs*> targets;
      {
        absl::MutexLock lock(&shared->mu);
        for (const Knob& k : shared->tuner.knobs()) targets.push_back(it->ctx_->knobs[k.node].get());
      }
      it->autotune_ = std::make_unique<AutotuneThread>(it->ctx_->stats.get(), std::move(targets), std::move(shared),
                                                       kAutotuneIntervalNs);
    } else {
      absl::MutexLock lock(&shared->mu);
      for (const Knob& k : shared->tuner.knobs()) {
        NodeKnobs* knobs = it->ctx_->knobs[k.node].get();
        if (k.kind == Knob::Kind::kParallelism) knobs->parallelism = static_cast<int>(k.value);
        if (k.kind == Knob::Kind::kDepth) knobs->depth = k.value;
      }
    }
  }
  return it;
}

// A map already computes ahead of its consumer: a prefetch right after it
// becomes extra depth of the map (no extra thread, no extra hand-off),
// unless the map runs before its batch (its iterator is the batch's).
bool Pipeline::FoldsIntoMap(size_t index) const {
  const std::vector<graph::CompiledNode>& nodes = run_.nodes;
  return nodes[index].kind == graph::NodeKind::kPrefetch && nodes[index - 1].kind == graph::NodeKind::kMap &&
         !run_.runs_before_batch[index - 1];
}

// Every map runs with knobs (its runner count, and the depth of a prefetch
// folded into it); a prefetch after anything else has its own. The ones
// the definition left open (parallelism 0, buffer_size 0) are returned as
// the autotuner's to change.
std::vector<Knob> Pipeline::MakeKnobs(ExecContext* ctx) const {
  const std::vector<graph::CompiledNode>& nodes = run_.nodes;
  ctx->knobs.resize(nodes.size());
  std::vector<Knob> tunable;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const graph::CompiledNode& node = nodes[i];
    if (node.kind == graph::NodeKind::kMap) {
      const int runners = node.parallelism > 0 ? node.parallelism : compiled_.threads;
      ctx->knobs[i] = std::make_unique<NodeKnobs>();
      ctx->knobs[i]->parallelism = runners;
      if (node.parallelism == 0 && runners > 1 && !run_.runs_before_batch[i]) {
        const int64_t bytes = MapPlan::Make(node)->ChunkBlockBytes(chunk_rows_);
        tunable.push_back(Knob{Knob::Kind::kParallelism, static_cast<int>(i), node.name, runners, 1, runners, bytes});
      }
    } else if (node.kind == graph::NodeKind::kPrefetch && !PrefetchAfterRemote(nodes, i)) {
      const bool folded = FoldsIntoMap(i);
      const int owner = folded ? static_cast<int>(i) - 1 : static_cast<int>(i);
      if (!folded) ctx->knobs[i] = std::make_unique<NodeKnobs>();
      ctx->knobs[owner]->depth = node.count;
      if (node.auto_depth) {
        tunable.push_back(Knob{Knob::Kind::kDepth, owner, node.name, node.count, 1, kMaxAutotunedDepth,
                               node.output_schema.RowBytes() * chunk_rows_});
      }
    }
  }
  return tunable;
}

std::optional<graph::ShardSpec> Pipeline::Sharding() const {
  for (const graph::CompiledNode& node : compiled_.nodes) {
    if (node.kind == graph::NodeKind::kShard) return node.shard;
  }
  return remote_ ? remote_->Sharding() : std::nullopt;
}

void Pipeline::Track(PipelineIterator* it, EpochPosition start) const {
  ExecContext* ctx = it->ctx_.get();
  if (remote_) {
    remote_->Identify(&start);
    ctx->orders =
        std::make_unique<SplitOrders>([remote = remote_](uint64_t epoch) { return remote->SplitOrder(epoch); });
  } else {
    ctx->orders = std::make_unique<SplitOrders>(compiled_.nodes.front(), compiled_.seed);
  }
  if (start.shuffle) ctx->shuffle_log = std::make_unique<ShuffleLog>();
  if (start.done) ctx->ledger = std::make_unique<DeliveryLedger>(ctx->orders->Get(start.epoch), *start.done);
  const bool repeats = Has(compiled_, graph::NodeKind::kRepeat);
  if (repeats) ctx->repeat_seams = std::make_unique<RepeatSeams>();
  it->fingerprint_ = compiled_.output_fingerprint;
  it->listing_ = Listing();
  if (const std::optional<graph::ShardSpec> shard = Sharding()) {
    ctx->shard_log = std::make_unique<ShardLog>();
    if (!start.shard) start.shard = EpochPosition::Sharded{0, shard->global_batch(), shard->num_shards, shard->pad};
    it->tracker_ = std::make_unique<ShardTracker>(ctx, std::move(start));
    return;
  }
  it->tracker_ = std::make_unique<PositionTracker>(ctx, repeats, std::move(start));
}

void Pipeline::PlanShuffleRestore(uint64_t epoch, const ShufflePosition& p, ExecContext* ctx) const {
  const auto shuffle = std::find_if(compiled_.nodes.begin(), compiled_.nodes.end(),
                                    [](const graph::CompiledNode& n) { return n.kind == graph::NodeKind::kShuffle; });
  ShuffleReplay replay = ReplayShuffle(compiled_.seed, OpKey(shuffle->name, 0), epoch, shuffle->count, p);
  if (SourceSelectsForShuffle(compiled_)) {
    RowSelection selection;
    for (int64_t row : replay.slots) selection.kept.push_back(row - p.oldest);
    std::sort(selection.kept.begin(), selection.kept.end());
    selection.through = replay.next - p.oldest;
    ctx->resume_selection = std::move(selection);
  }
  ctx->resume_buffer = std::move(replay);
}

std::unique_ptr<PipelineIterator> Pipeline::Iterate(uint64_t epoch) const {
  std::unique_ptr<PipelineIterator> it = NewIterator(/*tune=*/true);
  it->position_status_ = CheckResumable();
  if (it->position_status_.ok()) {
    EpochPosition start;
    start.epoch = epoch;
    if (Unordered()) {
      start.done = DoneRows{};
    } else if (Has(compiled_, graph::NodeKind::kShuffle)) {
      start.shuffle = ShufflePosition{};
    }
    Track(it.get(), std::move(start));
  }
  it->root_ = MakeIterator(it->ctx_.get(), compiled_.nodes.size() - 1, epoch);
  return it;
}

absl::Status Pipeline::CheckResumable() const {
  SLUICE_RETURN_IF_ERROR(exec::CheckResumable(compiled_));
  return remote_ ? remote_->CheckResumable() : absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<PipelineIterator>> Pipeline::Resume(const std::string& state) const {
  SLUICE_RETURN_IF_ERROR(CheckResumable());
  absl::StatusOr<EpochPosition> parsed = ParseState(state, compiled_.output_fingerprint, Listing());
  if (!parsed.ok()) return WithShardingHint(parsed.status(), state);
  EpochPosition p = *std::move(parsed);
  if (p.done.has_value() != Unordered()) {
    return absl::InvalidArgumentError(
        p.done ? "the state was saved unordered (or through a distribute node) but this pipeline runs ordered: "
                 "restore it with options unordered, or through a distribute node"
               : "the state was saved ordered but this pipeline runs unordered (or through a distribute node, whose "
                 "rows arrive as they come)");
  }
  // A remote part's shuffle is the workers' to check.
  if (!Unordered() && !remote_ && p.shuffle.has_value() != Has(compiled_, graph::NodeKind::kShuffle)) {
    return absl::InvalidArgumentError(p.shuffle ? "the state has a shuffle's position but this pipeline has no shuffle"
                                                : "this pipeline shuffles but the state has no shuffle position");
  }
  SLUICE_RETURN_IF_ERROR(CheckSharding(p));
  const bool repeats = Has(compiled_, graph::NodeKind::kRepeat);
  if (!repeats && p.repeat > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("the state is in a repeat's epoch ", p.repeat, " but this pipeline has no repeat"));
  }
  const uint64_t epoch = repeats ? RepeatEpoch(p.epoch, p.repeat) : p.epoch;
  std::unique_ptr<PipelineIterator> it = NewIterator(/*tune=*/true);
  Track(it.get(), p);
  const size_t splits = it->ctx_->orders->Get(epoch)->size();
  const int64_t last_done = !p.done ? 0 : p.done->splits.empty() ? p.done->splits_below : p.done->splits.back() + 1;
  if (last_done > static_cast<int64_t>(splits)) {
    return absl::InvalidArgumentError(absl::StrCat("the state's done splits reach split ", last_done - 1, " but epoch ",
                                                   epoch, " has ", splits, " splits"));
  }
  if (p.split > static_cast<int64_t>(splits)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the state's split is ", p.split, " but epoch ", epoch, " has ", splits, " splits"));
  }
  if (!remote_ && p.shuffle && p.shuffle->emitted > 0) PlanShuffleRestore(epoch, *p.shuffle, it->ctx_.get());
  it->ctx_->resume = std::move(p);
  it->ctx_->resume_epoch = epoch;
  it->root_ = MakeIterator(it->ctx_.get(), compiled_.nodes.size() - 1, it->ctx_->resume->epoch);
  return it;
}

// A state restores on any number of shards, but with the global batch and
// the uneven mode it was saved with: another would make other global
// batches of the rest of the epoch.
absl::Status Pipeline::CheckSharding(const EpochPosition& p) const {
  const std::optional<graph::ShardSpec> shard = Sharding();
  // A state of a pipeline with or without a shard has that pipeline's
  // fingerprint: ParseState refused another's.
  if (!p.shard || !shard) return absl::OkStatus();
  const graph::ShardSpec& s = *shard;
  auto describe = [](int64_t global, int shards, bool pad) {
    return absl::StrCat("a global batch of ", global, " (", shards, shards == 1 ? " shard of " : " shards of ",
                        global / std::max(shards, 1), ", uneven \"", pad ? "pad" : "drop", "\")");
  };
  if (p.shard->global_batch_size != s.global_batch() || p.shard->pad != s.pad) {
    const std::string why =
        p.shard->pad != s.pad ? "the rest of the epoch needs the uneven mode it was saved with"
        : p.shard->num_shards == s.num_shards
            ? "the rest of the epoch needs the batch size it was saved with"
            : "another number of shards needs the same global batch (each shard's batch the global one divided by "
              "the shards)";
    return absl::InvalidArgumentError(absl::StrCat(
        "the state was saved with ", describe(p.shard->global_batch_size, p.shard->num_shards, p.shard->pad),
        " but this pipeline has ", describe(s.global_batch(), s.num_shards, s.pad), ": ", why));
  }
  return absl::OkStatus();
}

absl::Status Pipeline::WithShardingHint(const absl::Status& refused, const std::string& state) const {
  if (absl::IsDataLoss(refused)) return refused;  // its shard fields may be the damage
  const std::optional<int> saved = StateShards(state);
  const std::optional<graph::ShardSpec> shard = Sharding();
  if (!saved || (*saved > 0) == shard.has_value()) return refused;
  if (*saved > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        refused.message(), "; the state was saved by a rank of a data-parallel job (a shard node of ", *saved,
        " shards) and this pipeline has no shard node: resume it through pipe.shard() with the same global batch, on "
        "any number of ranks"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      refused.message(),
      "; the state was saved without a shard node (by one process, outside a data-parallel job) "
      "and this pipeline shards its epochs (",
      shard->num_shards,
      " shards): such a state resumes in one process only. "
      "A one-process pipeline with a shard node where the job puts it, before the batch (.shard(1, 0)), saves states "
      "that resume on any number of ranks"));
}

std::unique_ptr<PipelineIterator> Pipeline::IterateSplits(uint64_t epoch, std::vector<io::Split> splits) const {
  // Runs of a few splits (a service worker's) are too short to tune, and
  // save no position (the service tracks the splits). Splits of fewer
  // records than threads (an image) get no more threads than records:
  // the others would only be started and joined (a worker runs thousands
  // of such splits an epoch).
  std::unique_ptr<PipelineIterator> it = NewIterator(/*tune=*/false, ThreadsFor(splits));
  it->position_status_ = absl::UnimplementedError("an iterator over given splits saves no position");
  it->ends_epoch_ = false;
  it->ctx_->splits = std::move(splits);
  it->ctx_->only_splits = true;
  it->root_ = MakeIterator(it->ctx_.get(), compiled_.nodes.size() - 1, epoch);
  return it;
}

int Pipeline::ThreadsFor(const std::vector<io::Split>& splits) const {
  int64_t records = 0;
  for (const io::Split& s : splits) {
    if (s.records() < 0) return compiled_.threads;  // a whole file: its count unknown
    records += s.records();
  }
  return static_cast<int>(std::clamp<int64_t>(records, 1, compiled_.threads));
}

const std::string& Pipeline::Listing() const {
  absl::call_once(listing_once_, [this] {
    // A service's workers list, and say what; a materialized pipeline's
    // files stand for the original's, whose states it restores (and the
    // other way round).
    if (remote_) {
      listing_ = remote_->Listing();
      return;
    }
    const graph::CompiledNode& first = compiled_.nodes.front();
    if (compiled_.materialized || first.kind != graph::NodeKind::kSource || first.format->files() == nullptr) {
      return;
    }
    listing_ = ListingOf(*first.format->files(), Splits(), first.format->ListingExtra());
  });
  return listing_;
}

const std::vector<io::Split>& Pipeline::Splits() const {
  absl::call_once(splits_once_, [this] {
    const graph::CompiledNode& first = compiled_.nodes.front();
    if (first.kind == graph::NodeKind::kSource) splits_ = first.format->MakeSplits();
  });
  return splits_;
}

}  // namespace sluice::exec
