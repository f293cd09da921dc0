// The most threads a pipeline may ask for.
#ifndef SLUICE_GRAPH_THREAD_LIMIT_H_
#define SLUICE_GRAPH_THREAD_LIMIT_H_

namespace sluice::graph {

// options.threads and a map's parallelism: past this, starting the threads
// would fail at the process's thread limit, with no message.
inline constexpr int kMaxThreads = 1024;

}  // namespace sluice::graph

#endif  // SLUICE_GRAPH_THREAD_LIMIT_H_
