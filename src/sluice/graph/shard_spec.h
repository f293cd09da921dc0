// The share of one rank in a sharded pipeline (ShardDef, compiled).
#ifndef SLUICE_GRAPH_SHARD_SPEC_H_
#define SLUICE_GRAPH_SHARD_SPEC_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace sluice::graph {

// A shard node's share: shard `index` of `num_shards` takes rows
// [index * batch, (index + 1) * batch) of every global batch of
// num_shards * batch rows of its input (ShardDef).
struct ShardSpec {
  int num_shards = 1;
  int index = 0;
  int64_t batch = 1;  // the per-shard batch: the batch node's after it, or 1
  bool pad = false;   // uneven "pad" (else "drop")
  // The one shard of a one-rank job, before a batch that keeps its short
  // last batch: the epoch's last rows go on as they are (evaluation on one
  // rank sees every sample), where N shards leave them out.
  bool keep_short = false;
  int64_t global_batch() const { return num_shards * batch; }
  // The rows this shard yields of an epoch of `rows` at the shard node.
  int64_t RowsOf(int64_t rows) const {
    const int64_t global = global_batch();
    if (keep_short) return rows;
    return (pad ? (rows + global - 1) / global : rows / global) * batch;
  }
  // Why an epoch of `rows` at the shard node (`node`) leaves a shard with
  // nothing, as InvalidArgument; OK when every shard gets its part. The
  // shard node says it at the epoch's end, the pipeline's length before.
  absl::Status CheckRows(const std::string& node, int64_t rows) const;
};

}  // namespace sluice::graph

#endif  // SLUICE_GRAPH_SHARD_SPEC_H_
