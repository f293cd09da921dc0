#include "sluice/exec/trace_buffer.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <string>

namespace sluice::exec {
namespace {

// The name NameThread gave the calling thread (empty: none).
thread_local std::string tls_thread_name;

}  // namespace

void TraceBuffer::Span(absl::string_view category, absl::string_view name, int64_t start_ns, int64_t end_ns) {
  const int thread = ThreadId();
  absl::MutexLock lock(&mu_);
  if (!tls_thread_name.empty()) thread_names_.emplace(thread, tls_thread_name);
  if (spans_.size() >= max_spans_) {
    ++dropped_;
    return;
  }
  spans_.push_back(TraceSpan{category, std::string(name), start_ns, end_ns, thread});
}

std::map<int, std::string> TraceBuffer::thread_names() const {
  absl::MutexLock lock(&mu_);
  return thread_names_;
}

std::vector<TraceSpan> TraceBuffer::spans() const {
  absl::MutexLock lock(&mu_);
  return spans_;
}

int64_t TraceBuffer::dropped() const {
  absl::MutexLock lock(&mu_);
  return dropped_;
}

void TraceBuffer::NameThread(absl::string_view name) {
  tls_thread_name = std::string(name);
  const std::string truncated(name.substr(0, 15));
  pthread_setname_np(pthread_self(), truncated.c_str());
}

int TraceBuffer::ThreadId() {
  thread_local const int id = static_cast<int>(syscall(SYS_gettid));
  return id;
}

}  // namespace sluice::exec
