// Spans of a traced run (ops per row tile, nodes per element, the
// consumer's waits), kept for the profiler's Chrome trace. A pipeline
// records only while a trace is attached (PipelineIterator::AttachTrace).
#ifndef SLUICE_EXEC_TRACE_BUFFER_H_
#define SLUICE_EXEC_TRACE_BUFFER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace sluice::exec {

struct TraceSpan {
  absl::string_view category;  // "op", "node", "consumer": string literals
  std::string name;
  int64_t start_ns = 0;  // NowNs()
  int64_t end_ns = 0;
  int thread = 0;  // kernel thread id
};

// Thread-safe. Bounded: past `max_spans` spans are counted, not kept.
class TraceBuffer {
 public:
  explicit TraceBuffer(size_t max_spans = 1'000'000) : max_spans_(max_spans) {}

  // REQUIRES: `category` is a string literal.
  void Span(absl::string_view category, absl::string_view name, int64_t start_ns, int64_t end_ns);

  std::vector<TraceSpan> spans() const;
  int64_t dropped() const;
  // The names of the threads that recorded spans (NameThread's), by id:
  // known for every such thread, however briefly it lived.
  std::map<int, std::string> thread_names() const;

  // The calling thread's kernel id (what /proc/self/task lists).
  static int ThreadId();
  // Names the calling thread (first 15 bytes), so traces, top and gdb
  // show which node it works for.
  static void NameThread(absl::string_view name);

 private:
  const size_t max_spans_;
  mutable absl::Mutex mu_;
  std::vector<TraceSpan> spans_ ABSL_GUARDED_BY(mu_);
  int64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<int, std::string> thread_names_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sluice::exec

#endif  // SLUICE_EXEC_TRACE_BUFFER_H_
