// Compile: validates a PipelineDef and binds every op to the columns it
// reads, producing the plan the executor runs. All errors a definition can
// have surface here, before any data is read, as InvalidArgument (or
// NotFound for missing files) naming the node, the op and the attr.
#ifndef SLUICE_GRAPH_COMPILED_PIPELINE_H_
#define SLUICE_GRAPH_COMPILED_PIPELINE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "pipeline.pb.h"
#include "sluice/core/schema.h"
#include "sluice/graph/shard_spec.h"
#include "sluice/graph/thread_limit.h"
#include "sluice/io/source_format.h"
#include "sluice/ops/op_registry.h"

namespace sluice::graph {

// One op of a map or filter node, inferred against the node's schema.
struct BoundOp {
  std::string op;    // the registered op
  std::string name;  // what profiles and errors call it: `op`, or "fused(a+b)"
  uint64_t op_key = 0;
  ops::InferredOp inferred;
  bool view = false;  // runs no kernel (ops::OpSchema::View)
  ops::OpLevel level = ops::OpLevel::kSample;
  // The kernel for the node's backend: made from `inferred` and set up when
  // a Pipeline is created from the plan (or put here by whoever alters the
  // plan, as an ablation does).
  std::shared_ptr<ops::Kernel> kernel;
  bool in_place = false;      // ops::OpSchema::InPlace
  bool whole_ranges = false;  // ops::OpSchema::WholeRanges
  std::string plugin = "";    // the plugin (.so) that registered the op, "" for a built-in one
};

// kRemote: a distribute node on the consumer's side; its elements come from
// the service's workers.
enum class NodeKind { kSource, kMap, kFilter, kShuffle, kBatch, kPrefetch, kRepeat, kTake, kRemote, kShard };

struct CompiledNode {
  NodeKind kind = NodeKind::kSource;
  std::string name;
  Schema input_schema;
  Schema output_schema;  // per-sample specs
  bool batched = false;  // this node's elements are batches
  // kSource
  std::shared_ptr<const io::SourceFormat> format;
  bool shuffle_splits = false;
  bool skip_corrupt = false;
  double throttle_bytes_per_s = 0;  // 0: unthrottled
  int parallel_reads = 1;           // kSource: splits read at once (SourceDef.parallel_reads)
  // kSource followed by a shard of more than one (prefetches between): the
  // shard's, whose rows alone its readers need make (io::KeptRows).
  std::optional<ShardSpec> kept_by_shard;
  // kMap (the chain), kFilter (one predicate); kRemote: elementwise ops, at
  // most one per column, that the receiver runs on a column as it arrives
  // (fold_receive.h)
  std::vector<BoundOp> ops;
  int parallelism = 0;
  ops::Backend backend = ops::Backend::kCpu;  // kMap: where the chain runs
  int device = -1;  // kMap on a device: which one (set with the kernels, which were set up there)
  // kShuffle: buffer size; kBatch: batch size; kPrefetch: depth;
  // kRepeat: epochs (<= 0 forever); kTake: elements
  int64_t count = 0;
  bool drop_remainder = false;
  // kBatch after a shard of more than one of the same pipeline part: each of the shard's
  // elements is one batch, short when a map skipped some of its rows, so
  // that every shard yields one batch per global batch.
  bool per_shard_element = false;
  bool auto_depth = false;  // kPrefetch: written as 0, the autotuner's to choose
  ShardSpec shard;          // kShard
};

struct CompiledPipeline {
  // The registry the ops were inferred with; their kernels come from it.
  // REQUIRES: outlives the plan.
  const ops::OpRegistry* registry = nullptr;
  std::string name;
  std::vector<CompiledNode> nodes;
  uint64_t seed = 0;
  int threads = 1;
  int64_t memory_budget_bytes = 0;
  // How the default budget was sized ("256 MiB (1/128 of 23.5 GiB for 1
  // rank)"); empty when the options set it.
  std::string memory_budget_default;
  bool ordered = true;
  bool stats = true;               // per-node statistics (exec/node_stats.h)
  bool autotune = true;            // implies stats
  std::string output_fingerprint;  // graph::OutputFingerprint of the definition
  // `sluice materialize` rewrote it: it reads the files it wrote, in place
  // of the original's (a state moves between the two).
  bool materialized = false;

  const Schema& output_schema() const { return nodes.back().output_schema; }
  bool batched() const { return nodes.back().batched; }
};

// Which nodes of a definition to compile. The default takes them all. A
// pipeline with a distribute node at index d is compiled in two parts: the
// workers' part [0, d), and the consumer's part [d, end) whose first node
// yields what the workers' part outputs. Node names and random keys are
// those of the whole definition, so either part draws as the whole would.
struct CompileRange {
  int begin = 0;
  int end = -1;  // one past the last node; -1: all
  // begin > 0: the per-sample schema of the elements flowing in at `begin`,
  // and whether they are batches.
  Schema input;
  bool input_batched = false;
  // The remote input runs elementwise ops as it receives (the service's
  // client does): fold them into the kRemote node (fold_receive.h).
  bool fold_into_remote = false;
};

absl::StatusOr<CompiledPipeline> Compile(const PipelineDef& def,
                                         const ops::OpRegistry& registry = ops::OpRegistry::Global(),
                                         const CompileRange& range = {});

// The registered ops a definition's map and filter nodes name (nodes
// [begin, end)), in order of first use: what a worker must have to run it.
std::vector<std::string> OpsUsed(const PipelineDef& def, int begin = 0, int end = -1);

// Whether a map node of `def` runs on a device (not the cpu).
bool UsesDevice(const PipelineDef& def);

// Whether `def` runs the user's Python code (a python op, a Python
// dataset): the code the service's workers, not its dispatcher, load.
bool RunsPython(const PipelineDef& def);
// Whether `op` is one that runs the user's Python code (python, python_batch).
bool IsPythonOp(const std::string& op);
// What a worker must list among its ops to run `def`: OpsUsed, and "python"
// for a Python dataset (workers started with --no-python list neither).
std::vector<std::string> OpsAWorkerNeeds(const PipelineDef& def);

// A shard node's count and index as given, or the job's when num_shards is
// 0 ($WORLD_SIZE and $RANK as torchrun sets them; one shard without them),
// checked; and its uneven mode. The per-shard batch is left at 1.
// InvalidArgument prefixed with `where`.
absl::StatusOr<ShardSpec> ShardSpecOf(const ShardDef& shard, const std::string& where);
// Writes the job's count and index into every shard node whose num_shards
// is 0, so that a service's workers run this process's shard, not theirs.
absl::Status ResolveShards(PipelineDef* def);

// Index of the distribute node, -1 when there is none; InvalidArgument when
// there are several or it comes first.
absl::StatusOr<int> FindDistribute(const PipelineDef& def);

absl::string_view NodeKindName(NodeKind kind);

}  // namespace sluice::graph

#endif  // SLUICE_GRAPH_COMPILED_PIPELINE_H_
