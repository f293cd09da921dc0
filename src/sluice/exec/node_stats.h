// What each node of a running pipeline did: elements and bytes out, time
// computing, time blocked on its input and on room downstream, elements
// ready now, and per op the time spent in it. Relaxed atomic counters,
// written by the node's threads and read at any time by the profiler and
// the autotuner; a few clock reads per element or row tile, never per
// sample (measured cost in bench/RESULTS.md).
#ifndef SLUICE_EXEC_NODE_STATS_H_
#define SLUICE_EXEC_NODE_STATS_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sluice/graph/compiled_pipeline.h"

namespace sluice::exec {

inline int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The CPU time the calling thread has used.
int64_t ThreadCpuNs();

// Thread-safe.
struct NodeStats {
  explicit NodeStats(size_t ops) : op_busy_ns(ops) {}

  std::atomic<int64_t> elements{0};  // chunks or batches handed downstream
  std::atomic<int64_t> rows{0};
  std::atomic<int64_t> bytes{0};
  // Time callers spent in this node's GetNext, summed. For a node that
  // computes on the caller's thread this includes its input's time.
  std::atomic<int64_t> get_next_ns{0};
  // Computing, summed over the node's threads (maps: running ops; nodes on
  // the caller's thread: derived, see Snapshot).
  std::atomic<int64_t> busy_ns{0};
  // The node's own threads blocked for room downstream (maps, prefetch).
  std::atomic<int64_t> output_wait_ns{0};
  // Sources: the part of get_next_ns their callers spent off the CPU
  // (waiting for storage, a throttle, the read-ahead threads), and the CPU
  // of their read-ahead threads; their busy time is reading's CPU.
  std::atomic<int64_t> off_cpu_ns{0};
  std::atomic<int64_t> read_ahead_cpu_ns{0};
  std::atomic<int64_t> buffered{0};              // finished elements ready now
  std::vector<std::atomic<int64_t>> op_busy_ns;  // maps and filters: per op
};

struct NodeStatsSnapshot {
  std::string name;
  graph::NodeKind kind = graph::NodeKind::kSource;
  int64_t elements = 0, rows = 0, bytes = 0;
  int64_t busy_ns = 0;         // computing (own threads, or own share of GetNext)
  int64_t input_wait_ns = 0;   // blocked in the input node's GetNext
  int64_t output_wait_ns = 0;  // blocked for room downstream
  int64_t get_next_ns = 0;     // callers blocked in this node's GetNext
  int64_t buffered = 0;
  std::vector<std::string> op_names;
  std::vector<int64_t> op_busy_ns;
};

struct PipelineStatsSnapshot {
  int64_t at_ns = 0;  // NowNs() when taken
  std::vector<NodeStatsSnapshot> nodes;
  int64_t consumer_calls = 0;    // Next() calls that returned an element
  int64_t consumer_wait_ns = 0;  // time those calls blocked
};

// One per running pipeline (ExecContext). Thread-safe.
class PipelineStats {
 public:
  // runs_before_batch[i]: map i runs its ops in map i - 2's threads
  // (map_merge.h), whose counters count them after its own; a snapshot
  // gives them back to map i.
  explicit PipelineStats(const graph::CompiledPipeline& pipeline, std::vector<bool> runs_before_batch = {});

  NodeStats* node(size_t index) { return nodes_[index].get(); }
  void CountConsumerWait(int64_t ns) {
    consumer_calls_.fetch_add(1, std::memory_order_relaxed);
    consumer_wait_ns_.fetch_add(ns, std::memory_order_relaxed);
  }

  // Counters as of now. Derives the busy time of nodes that compute on
  // their caller's thread (source, batch, filter, shuffle, take): their
  // GetNext time less their input's.
  PipelineStatsSnapshot Snapshot() const;

 private:
  // Map `after`'s share of map `before`'s computing, moved to it.
  static void GiveBack(NodeStatsSnapshot* before, NodeStatsSnapshot* after, const NodeStats& counted);

  const graph::CompiledPipeline& pipeline_;
  const std::vector<bool> runs_before_batch_;
  std::vector<std::unique_ptr<NodeStats>> nodes_;
  std::atomic<int64_t> consumer_calls_{0};
  std::atomic<int64_t> consumer_wait_ns_{0};
};

// Adds the time since construction to a counter (no-op when null).
class ScopedNs {
 public:
  explicit ScopedNs(std::atomic<int64_t>* counter) : counter_(counter), start_(counter ? NowNs() : 0) {}
  ~ScopedNs() {
    if (counter_ != nullptr) counter_->fetch_add(NowNs() - start_, std::memory_order_relaxed);
  }

 private:
  std::atomic<int64_t>* counter_;
  int64_t start_;
};

}  // namespace sluice::exec

#endif  // SLUICE_EXEC_NODE_STATS_H_
