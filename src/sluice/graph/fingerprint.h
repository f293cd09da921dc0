// A pipeline definition's identity: the same definition gives the same
// fingerprint in every process (the service deduplicates pipelines by it).
#ifndef SLUICE_GRAPH_FINGERPRINT_H_
#define SLUICE_GRAPH_FINGERPRINT_H_

#include <string>

#include "pipeline.pb.h"

namespace sluice::graph {

// The message's bytes with map entries in key order: equal messages give
// equal bytes in every process (a plain serialization writes a map in the
// order of its hash, which is seeded per process).
std::string DeterministicBytes(const google::protobuf::Message& message);

// 32 hex digits: the first 128 bits of SHA-256 over DeterministicBytes.
std::string Fingerprint(const PipelineDef& def);

// The fingerprint of the definition with the user's Python code counted by
// its identity (a python op's `identity` attr, a Python dataset's digest)
// rather than by its pickled bytes, which differ from process to process:
// equal in every process that builds the same pipeline (the service's test
// of whether two consumers of a named job run one pipeline).
std::string DefinitionFingerprint(const PipelineDef& def);

// The fingerprint of what `def` outputs: its definition without what only
// shapes the run (threads, map parallelism, prefetch depths, parallel
// reads, throttle, the files a service pinned, a Python op's pickled
// callable (its `identity` attr stays), memory budget, statistics,
// autotuning, the pipeline's name, a shard node's count and index and the
// per-shard batch after it;
// node names key random draws and stay), nor where it runs or in what order
// rows arrive (a distribute node, options unordered), so a saved iterator
// state restores under another thread count, with or without a service's
// workers, on another number of shards. A pipeline `sluice materialize`
// rewrote, as it wrote it, has the original's (options.materialized_from).
std::string OutputFingerprint(const PipelineDef& def);

}  // namespace sluice::graph

#endif  // SLUICE_GRAPH_FINGERPRINT_H_
