#include "sluice/placement/meter.h"

#include <time.h>

#include <algorithm>
#include <limits>

#include "sluice/placement/kept_prefix.h"

namespace sluice::placement {
namespace {

int64_t ProcessCpuNs() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

exec::PipelineStatsSnapshot Snapshot(const exec::PipelineIterator& it) {
  return it.stats() != nullptr ? it.stats()->Snapshot() : exec::PipelineStatsSnapshot{};
}

// The batch node's index, or the number of nodes.
size_t BatchIndex(const exec::PipelineStatsSnapshot& s) {
  for (size_t i = 0; i < s.nodes.size(); ++i) {
    if (s.nodes[i].kind == graph::NodeKind::kBatch) return i;
  }
  return s.nodes.size();
}

}  // namespace

void WindowMeter::MeasurePrefix(int64_t epoch_rows, Measurements* m) const {
  if (busy_ns_ > 0) m->prefix_share = static_cast<double>(prefix_ns_) / busy_ns_;
  // An epoch of its output: its rows' size, or what the rows of the window took.
  const double per_row = prefix_row_bytes_ > 0 ? static_cast<double>(prefix_row_bytes_)
                         : rows_ > 0           ? static_cast<double>(prefix_bytes_) / rows_
                                               : -1;
  m->prefix_bytes =
      epoch_rows > 0 && per_row >= 0 ? static_cast<int64_t>(per_row * epoch_rows) : std::numeric_limits<int64_t>::max();
  m->prefix_room_bytes = KeptPrefix::Room();
}

void WindowMeter::Start(const exec::PipelineIterator& it) {
  start_ns_ = exec::NowNs();
  cpu_start_ns_ = ProcessCpuNs();
  stats_start_ = Snapshot(it);
}

bool WindowMeter::Due() const { return elements_ >= kMinElements && ns_ + exec::NowNs() - start_ns_ >= kMinWindowNs; }

void WindowMeter::Fold(const exec::PipelineIterator& it) {
  const exec::PipelineStatsSnapshot now = Snapshot(it);
  ns_ += exec::NowNs() - start_ns_;
  cpu_ns_ += ProcessCpuNs() - cpu_start_ns_;
  const size_t batch = BatchIndex(now);
  for (size_t i = 0; i < now.nodes.size() && i < stats_start_.nodes.size(); ++i) {
    const int64_t ns = now.nodes[i].busy_ns - stats_start_.nodes[i].busy_ns;
    busy_ns_ += ns;
    if (i < batch) front_ns_ += ns;
    if (i >= 1 && i <= static_cast<size_t>(prefix_maps_)) prefix_ns_ += ns;
    if (i == static_cast<size_t>(prefix_maps_) && i > 0)
      prefix_bytes_ += now.nodes[i].bytes - stats_start_.nodes[i].bytes;
    if (i + 1 == batch) front_bytes_ += now.nodes[i].bytes - stats_start_.nodes[i].bytes;
    if (i == batch) {
      batch_bytes_ += now.nodes[i].bytes - stats_start_.nodes[i].bytes;
      batches_ += now.nodes[i].elements - stats_start_.nodes[i].elements;
    }
  }
  Start(it);
}

Measurements WindowMeter::Take(const exec::Pipeline& pipeline, const exec::PipelineIterator& it,
                               const Placement& placement, int64_t epoch_rows) {
  Fold(it);
  const int prefix_maps = prefix_maps_;
  const double seconds = std::max<int64_t>(1, ns_) * 1e-9;
  Measurements m;
  m.placement = placement;
  m.seconds = seconds;
  m.cores = UsableCores();
  m.rate = rows_ / seconds;
  m.wait_share = std::min(1.0, wait_ns_ * 1e-9 / seconds);
  m.process_cores = cpu_ns_ * 1e-9 / seconds;
  // Busy time is wall time computing: with more runnable threads than
  // cores it counts waits for a core too, so it is capped at the process's.
  m.engine_cores = std::min(busy_ns_ * 1e-9 / seconds, m.process_cores);
  if (rows_ > 0) {
    m.cpu_s_per_sample = m.engine_cores * seconds / rows_;
    m.front_bytes_per_sample = static_cast<double>(front_bytes_) / rows_;
  }
  if (busy_ns_ > 0) m.front_share = static_cast<double>(front_ns_) / busy_ns_;
  if (prefix_maps_ > 0) MeasurePrefix(epoch_rows, &m);
  const BufferPool::Stats pool = pipeline.memory();
  m.memory_free_bytes = std::max<int64_t>(
      0, pipeline.memory_budget() - static_cast<int64_t>(pool.peak_held_bytes) - pipeline.ring_bytes());
  // A local worker's ring: the service's default (distribute()'s
  // shared_memory_mb), or three batches when they are larger.
  m.worker_ring_bytes = std::max<int64_t>(int64_t{64} << 20, batches_ > 0 ? 3 * batch_bytes_ / batches_ : 0);
  *this = WindowMeter();
  prefix_maps_ = prefix_maps;
  Start(it);
  return m;
}

}  // namespace sluice::placement
