// The iterator every node kind implements, and the factories that make
// them (one file per node kind: source_node.cc, map_node.cc, ...).
#ifndef SLUICE_EXEC_ITERATOR_H_
#define SLUICE_EXEC_ITERATOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "sluice/core/batch.h"
#include "sluice/exec/autotune.h"
#include "sluice/exec/exec_context.h"
#include "sluice/graph/compiled_pipeline.h"

namespace sluice::exec {

// Yields the node's elements as chunks of rows: before the batch node a
// chunk is any number of samples; from the batch node on, one batch.
// GetNext is called by one thread at a time. End of data is not an error:
// *end becomes true, and stays true on later calls. The first error is
// returned and the iterator must not be used further. Destroying an
// iterator before its end requires the context to be cancelled first (the
// pipeline's iterator does), so that threads blocked upstream wake up.
class Iterator {
 public:
  virtual ~Iterator() = default;
  virtual absl::Status GetNext(Batch* out, bool* end) = 0;
  // A consumer that takes `rows` more rows for its current element says so
  // before its next GetNext: an input that hands out the rows it received
  // in pieces (the service's client) then hands out up to that many at
  // once, and none the consumer would hold past its element. Others ignore it.
  virtual void LimitNextRows(int64_t rows) {}
};

// What a node needs to create its iterator for one epoch.
struct IteratorArgs {
  ExecContext* ctx;
  const graph::CompiledNode* node;
  uint64_t epoch;
  // Rows per chunk the source should produce (the batch size when batches
  // can be cut straight from source chunks).
  int64_t chunk_rows;
  // Map nodes: extra finished elements to keep ready (a prefetch node folded
  // into the map that precedes it).
  int64_t prefetch_depth = 0;
  // The node's counters; null when statistics are off.
  NodeStats* stats = nullptr;
  // Settings the autotuner changes while the node runs; null when the node
  // runs as written.
  NodeKnobs* knobs = nullptr;
  // Sources: rows of the first chunk when > 0 (then chunk_rows each): a
  // repeat starting an epoch mid-batch asks for the rest of that batch, so
  // that the epoch's chunks after it line up with batches again.
  int64_t first_chunk_rows = 0;
  // Where the node's output buffers come from; null: ctx->pool. Nodes that
  // feed a device map write page-locked memory (Pipeline::OutputPools).
  BufferPool* pool = nullptr;

  BufferPool* output_pool() const { return pool != nullptr ? pool : ctx->pool; }
};

// Creates the iterator of nodes[0..index] for an epoch.
// `first_chunk_rows`: IteratorArgs::first_chunk_rows for the new input.
using InputFactory = std::function<std::unique_ptr<Iterator>(uint64_t epoch, int64_t first_chunk_rows)>;

std::unique_ptr<Iterator> MakeSourceIterator(const IteratorArgs& args);
std::unique_ptr<Iterator> MakeMapIterator(const IteratorArgs& args, std::unique_ptr<Iterator> input);
std::unique_ptr<Iterator> MakeFilterIterator(const IteratorArgs& args, std::unique_ptr<Iterator> input);
std::unique_ptr<Iterator> MakeShuffleIterator(const IteratorArgs& args, std::unique_ptr<Iterator> input);
std::unique_ptr<Iterator> MakeBatchIterator(const IteratorArgs& args, std::unique_ptr<Iterator> input);
// Cuts `input` into chunks of args.chunk_rows rows (the last may be short).
std::unique_ptr<Iterator> MakeRechunkIterator(const IteratorArgs& args, std::unique_ptr<Iterator> input);
std::unique_ptr<Iterator> MakePrefetchIterator(const IteratorArgs& args, std::unique_ptr<Iterator> input);
std::unique_ptr<Iterator> MakeTakeIterator(const IteratorArgs& args, std::unique_ptr<Iterator> input);
std::unique_ptr<Iterator> MakeShardIterator(const IteratorArgs& args, std::unique_ptr<Iterator> input);
// Repeat creates its input anew for each epoch it runs.
std::unique_ptr<Iterator> MakeRepeatIterator(const IteratorArgs& args, InputFactory input);

// Elements that arrive from outside the process, for a pipeline's
// distribute node: the service's client implements it (exec knows nothing
// of the service). Thread-safe.
class RemoteInput {
 public:
  virtual ~RemoteInput() = default;
  // The elements of epoch `epoch` (batches when the workers' part batches),
  // as `node` (the pipeline's kRemote node) yields them: with its receive
  // ops run, when the pipeline was compiled with CompileRange's
  // fold_into_remote.
  virtual std::unique_ptr<Iterator> Open(ExecContext* ctx, const graph::CompiledNode& node, uint64_t epoch) = 0;
  // Elements per epoch, as Pipeline::Cardinality counts them.
  virtual int64_t Cardinality() const = 0;

  // A consumer's position can be saved (exec/resume.h) when OK: then Open
  // resumes an epoch from ctx->ResumeOf(epoch), the rows arrive with their
  // origins, and the remote input tells ctx->ledger when a split ended.
  virtual absl::Status CheckResumable() const {
    return absl::UnimplementedError("this remote input cannot save its position");
  }
  // The order in which the workers' source reads its splits in `epoch`
  // (as EpochSplitOrder).
  virtual std::vector<io::Split> SplitOrder(uint64_t epoch) const { return {}; }
  // What the workers' source listed (ListingOf), when known.
  virtual std::string Listing() const { return ""; }
  // Names in `p` what the remote side keeps of this consumer's progress.
  virtual void Identify(EpochPosition* p) const {}
  // A sharded remote part (one shard's stream, made in order): its shard.
  // Open then logs the remote part's position after each element it yields
  // in ctx->shard_log, and resumes from ctx->ResumeOf(epoch) as given.
  virtual std::optional<graph::ShardSpec> Sharding() const { return std::nullopt; }
  // Bytes it holds outside the pipeline's buffer pool (the shared-memory
  // rings that workers on this host write batches into).
  virtual int64_t HeldBytes() const { return 0; }
  // The most it may hold outside the pool (a share of the pipeline's
  // memory budget), and whom to tell what it holds when that changes (the
  // pool, which caches that much less).
  virtual void LimitHeldBytes(int64_t bytes, std::function<void(int64_t)> held_changed) {}
};

}  // namespace sluice::exec

#endif  // SLUICE_EXEC_ITERATOR_H_
