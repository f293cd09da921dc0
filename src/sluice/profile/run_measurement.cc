#include "sluice/profile/run_measurement.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "sluice/core/status_macros.h"

namespace sluice::profile {
namespace {

// CPU seconds process `pid` has run (user and system), from /proc; 0 when
// it is gone.
double CpuSecondsOf(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/stat");
  std::string stat;
  // getline, not istreambuf_iterator: a process that ends between the open
  // and the read fails the read (ESRCH), which getline turns into an empty
  // line and the iterator into an exception out of the profile.
  std::getline(in, stat);
  const size_t name_end = stat.rfind(')');  // the name in parentheses may hold spaces
  if (name_end == std::string::npos) return 0;
  const std::vector<std::string> fields = absl::StrSplit(stat.substr(name_end + 2), ' ');
  double utime = 0, stime = 0;  // fields 14 and 15 of stat(5); these start at field 3
  if (fields.size() < 13 || !absl::SimpleAtod(fields[11], &utime) || !absl::SimpleAtod(fields[12], &stime)) return 0;
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// CPU seconds of this process and of its child processes, live (from
// /proc) and ended (RUSAGE_CHILDREN, which counts only those): a python
// op's or dataset's processes and local workers do the pipeline's work too.
double ProcessCpuSeconds() {
  double seconds = 0;
  for (const int who : {RUSAGE_SELF, RUSAGE_CHILDREN}) {  // the children that ended, waited for
    rusage u;
    ::getrusage(who, &u);
    seconds += u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec * 1e-6;
  }
  DIR* tasks = opendir("/proc/self/task");
  if (tasks == nullptr) return seconds;
  while (dirent* task = readdir(tasks)) {
    if (task->d_name[0] == '.') continue;
    std::ifstream children(absl::StrCat("/proc/self/task/", task->d_name, "/children"));
    std::string child;
    while (children >> child) seconds += CpuSecondsOf(child);
  }
  closedir(tasks);
  return seconds;
}

// Kernel ids and names of this process's threads now.
void ReadThreadNames(std::map<int, std::string>* names) {
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return;
  while (dirent* entry = readdir(dir)) {
    int tid = 0;
    if (!absl::SimpleAtoi(entry->d_name, &tid)) continue;
    std::ifstream comm(absl::StrCat("/proc/self/task/", tid, "/comm"));
    std::string name;
    if (std::getline(comm, name)) (*names)[tid] = name;
  }
  closedir(dir);
}

// total += now - base, node by node (base may be empty: zeros).
void AddDelta(const exec::PipelineStatsSnapshot& now, const exec::PipelineStatsSnapshot* base,
              std::vector<exec::NodeStatsSnapshot>* total) {
  if (total->empty()) {
    *total = now.nodes;
    for (exec::NodeStatsSnapshot& n : *total) {
      n.elements = n.rows = n.bytes = n.busy_ns = n.input_wait_ns = n.output_wait_ns = n.get_next_ns = 0;
      std::fill(n.op_busy_ns.begin(), n.op_busy_ns.end(), 0);
    }
  }
  for (size_t i = 0; i < now.nodes.size(); ++i) {
    const exec::NodeStatsSnapshot& a = now.nodes[i];
    const exec::NodeStatsSnapshot* b = base ? &base->nodes[i] : nullptr;
    exec::NodeStatsSnapshot& t = (*total)[i];
    t.elements += a.elements - (b ? b->elements : 0);
    t.rows += a.rows - (b ? b->rows : 0);
    t.bytes += a.bytes - (b ? b->bytes : 0);
    t.busy_ns += a.busy_ns - (b ? b->busy_ns : 0);
    t.input_wait_ns += a.input_wait_ns - (b ? b->input_wait_ns : 0);
    t.output_wait_ns += a.output_wait_ns - (b ? b->output_wait_ns : 0);
    t.get_next_ns += a.get_next_ns - (b ? b->get_next_ns : 0);
    for (size_t op = 0; op < a.op_busy_ns.size(); ++op) {
      t.op_busy_ns[op] += a.op_busy_ns[op] - (b ? b->op_busy_ns[op] : 0);
    }
  }
}

// Samples the consumer's counts (which span epochs) and the running
// iterator's buffers into time series.
class Sampler {
 public:
  // The counters are the consumer's: rows delivered, ns blocked in next().
  Sampler(double interval_s, const std::atomic<int64_t>* rows, const std::atomic<int64_t>* wait_ns)
      : interval_(absl::Seconds(interval_s)), rows_(rows), wait_ns_(wait_ns) {
    series_.push_back(Series{"samples/s", {}});
    series_.push_back(Series{"consumer wait", {}});
    thread_ = std::thread([this] { Run(); });
  }
  ~Sampler() { Stop(); }

  void Watch(const exec::PipelineIterator* it, int64_t zero_ns) {
    absl::MutexLock lock(&mu_);
    it_ = it;
    zero_ns_ = zero_ns;
  }
  // The iterator watched until it goes out of scope, on every way out (an
  // error, a cancel): a sample must never read a destroyed one.
  class Watching {
   public:
    Watching(Sampler* sampler, const exec::PipelineIterator* it, int64_t zero_ns) : sampler_(sampler) {
      sampler_->Watch(it, zero_ns);
    }
    ~Watching() {
      absl::MutexLock lock(&sampler_->mu_);
      sampler_->it_ = nullptr;
    }
    Watching(const Watching&) = delete;
    Watching& operator=(const Watching&) = delete;

   private:
    Sampler* const sampler_;
  };
  void Stop() {
    if (stopped_.HasBeenNotified()) return;
    stopped_.Notify();
    thread_.join();
  }
  std::vector<Series> series() {
    absl::MutexLock lock(&mu_);
    return series_;
  }
  std::map<int, std::string> thread_names() {
    absl::MutexLock lock(&mu_);
    return names_;
  }

  // Takes one sample now (besides the periodic ones), so that a short or
  // starved run still has its points.
  void Sample() {
    std::map<int, std::string> names;
    ReadThreadNames(&names);
    absl::MutexLock lock(&mu_);
    names_.insert(names.begin(), names.end());
    if (zero_ns_ == 0) return;
    const int64_t at = exec::NowNs();
    const int64_t rows = rows_->load(), wait = wait_ns_->load();
    const double t = (at - zero_ns_) * 1e-9;
    if (last_at_ > 0 && at > last_at_) {
      const double dt = (at - last_at_) * 1e-9;
      series_[0].points.emplace_back(t, (rows - last_rows_) / dt);
      series_[1].points.emplace_back(t, (wait - last_wait_) * 1e-9 / dt);
    }
    last_at_ = at;
    last_rows_ = rows;
    last_wait_ = wait;
    if (it_ == nullptr || it_->stats() == nullptr) return;
    const exec::PipelineStatsSnapshot now = it_->stats()->Snapshot();
    if (series_.size() == 2) {
      for (const exec::NodeStatsSnapshot& n : now.nodes) series_.push_back(Series{n.name + " buffered", {}});
    }
    for (size_t i = 0; i < now.nodes.size(); ++i) {
      series_[2 + i].points.emplace_back(t, static_cast<double>(now.nodes[i].buffered));
    }
  }

 private:
  void Run() {
    do {
      Sample();
    } while (!stopped_.WaitForNotificationWithTimeout(interval_));
  }

  const absl::Duration interval_;
  const std::atomic<int64_t>* rows_;
  const std::atomic<int64_t>* wait_ns_;
  absl::Mutex mu_;
  const exec::PipelineIterator* it_ ABSL_GUARDED_BY(mu_) = nullptr;
  int64_t zero_ns_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t last_at_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t last_rows_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t last_wait_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<Series> series_ ABSL_GUARDED_BY(mu_);
  std::map<int, std::string> names_ ABSL_GUARDED_BY(mu_);
  absl::Notification stopped_;
  std::thread thread_;
};

// Whether a timed part of `elapsed_ns` whose longest wait for an element
// was `longest_wait_ns` is done. A pipeline that delivers in bursts (a
// slow store's objects, a throttled source's chunks) is measured over
// several of them: a window of one or two bursts counts a burst more or
// less by where it starts and ends, off by half or double.
bool WindowDone(int64_t elapsed_ns, int64_t longest_wait_ns, double min_seconds) {
  constexpr int kBurstsPerWindow = 8;
  constexpr double kMostStretch = 8;  // times min_seconds, for the gaps of a stall
  const double elapsed = elapsed_ns * 1e-9;
  if (elapsed < min_seconds) return false;
  return longest_wait_ns * kBurstsPerWindow <= elapsed_ns || elapsed >= kMostStretch * min_seconds;
}

// The threads the sampler saw, and those the trace knows of: every thread
// that recorded a span, however short-lived.
std::vector<std::pair<int, std::string>> ThreadNames(Sampler* sampler, const exec::TraceBuffer* trace) {
  std::map<int, std::string> names = sampler->thread_names();
  if (trace != nullptr) {
    for (const auto& [tid, name] : trace->thread_names()) names[tid] = name;
  }
  return {names.begin(), names.end()};
}

}  // namespace

absl::StatusOr<RunMeasurement> MeasureRun(const exec::Pipeline& pipeline, const MeasureOptions& options) {
  RunMeasurement m;
  std::atomic<int64_t> delivered{0}, waited_ns{0};  // timed part, for the sampler
  Sampler sampler(options.sample_interval_s, &delivered, &waited_ns);
  const int64_t begin_ns = exec::NowNs();
  double cpu0 = 0;
  int64_t timed_samples = 0;
  int64_t longest_wait_ns = 0;  // of the timed part
  auto done = [&] {
    return m.start_ns != 0 && WindowDone(exec::NowNs() - m.start_ns, longest_wait_ns, options.min_seconds);
  };
  for (uint64_t epoch = 0;; ++epoch) {
    if (done()) break;
    std::unique_ptr<exec::PipelineIterator> it = pipeline.Iterate(epoch);
    if (options.trace != nullptr) it->AttachTrace(options.trace);
    const Sampler::Watching watching(&sampler, it.get(), m.start_ns);
    exec::PipelineStatsSnapshot at_first;  // set in the epoch timing starts in
    bool any = false;
    while (true) {
      Batch batch;
      bool end = false;
      const int64_t asked = exec::NowNs();
      SLUICE_RETURN_IF_ERROR(it->Next(&batch, &end));
      if (options.cancelled != nullptr && options.cancelled->load()) return absl::CancelledError("profile cancelled");
      if (end) break;
      if (m.start_ns != 0) {
        const int64_t waited = exec::NowNs() - asked;
        waited_ns += waited;
        // A paced run is timed by the trainer's steps, not stretched; an
        // epoch's first element waits for its start (a shuffle's buffer
        // filling), not for a burst.
        if (options.consumer_samples_per_s <= 0 && any) longest_wait_ns = std::max(longest_wait_ns, waited);
      }
      any = true;
      if (m.start_ns == 0) {  // timed from the first element, as `sluice run` is
        m.start_ns = exec::NowNs();
        m.first_element_ms = (m.start_ns - begin_ns) * 1e-6;
        cpu0 = ProcessCpuSeconds();
        if (it->stats() != nullptr) at_first = it->stats()->Snapshot();
        sampler.Watch(it.get(), m.start_ns);
        sampler.Sample();
      } else {
        timed_samples += batch.rows;
        delivered += batch.rows;
      }
      if (options.consumer_samples_per_s > 0) {  // the trainer's step on this batch, within the run's time
        const double left = options.min_seconds - (exec::NowNs() - m.start_ns) * 1e-9;
        absl::SleepFor(absl::Seconds(std::min(batch.rows / options.consumer_samples_per_s, std::max(left, 0.0))));
      }
      if (done()) break;
    }
    if (it->stats() != nullptr) {
      const exec::PipelineStatsSnapshot end = it->stats()->Snapshot();
      const exec::PipelineStatsSnapshot* base = at_first.nodes.empty() ? nullptr : &at_first;
      AddDelta(end, base, &m.nodes);
    }
    if (it->autotune() != nullptr) {
      m.tuned = it->autotune()->knobs();
      m.tune_log = it->autotune()->log();
    }
    sampler.Sample();
    if (!any) {
      if (epoch == 0) return absl::FailedPreconditionError("the pipeline yields nothing to measure");
      break;
    }
  }
  m.seconds = (exec::NowNs() - m.start_ns) * 1e-9;
  m.cpu_seconds = ProcessCpuSeconds() - cpu0;
  m.samples = timed_samples;
  m.samples_per_s = m.seconds > 0 ? timed_samples / m.seconds : 0;
  m.consumer_wait_share = m.seconds > 0 ? waited_ns.load() * 1e-9 / m.seconds : 0;
  sampler.Stop();
  m.series = sampler.series();
  m.thread_names = ThreadNames(&sampler, options.trace);
  m.memory = pipeline.memory();
  m.memory_budget = pipeline.memory_budget();
  return m;
}

}  // namespace sluice::profile
