#include "sluice/service/service_metrics.h"

#include <string>
#include <utility>

#include "sluice/service/metric_families.h"

namespace sluice::service {
namespace {

using Labels = MetricFamilies::Labels;

}  // namespace

std::vector<prometheus::MetricFamily> DispatcherMetrics(const DispatcherStatus& status) {
  MetricFamilies f;
  f.Gauge("sluice_workers", "live workers", {}, status.workers_size());
  f.Gauge("sluice_pipelines", "registered pipelines", {}, status.pipelines());
  f.Gauge("sluice_journal_bytes", "size of the dispatcher's journal (0 without --work-dir)", {},
          static_cast<double>(status.journal_bytes()));
  f.Errors("sluice_errors_total", "faults since the dispatcher started, by kind", status.errors());
  for (const WorkerStatusEntry& w : status.workers()) {
    const Labels worker = {{"worker", std::to_string(w.worker_id())}, {"address", w.address()}};
    f.Gauge("sluice_worker_samples_per_second", "samples a worker sent per second (its last heartbeat)", worker,
            w.samples_per_s());
    f.Gauge("sluice_worker_active_streams", "streams a worker is serving", worker, w.active_streams());
  }
  for (const JobStatusEntry& j : status.jobs()) {
    const std::string id = std::to_string(j.job_id());
    const Labels job = {{"job", j.job_name().empty() ? id : j.job_name()}, {"job_id", id}};
    f.Gauge("sluice_job_clients", "consumers reading the job", job, j.clients());
    f.Gauge("sluice_job_samples_per_second", "samples the job's consumers take per second", job, j.samples_per_s());
    f.Gauge("sluice_job_client_wait_share", "share of time the job's consumers wait for data (mean, 0 to 1)", job,
            j.wait_share());
    f.Gauge("sluice_job_epoch", "the latest epoch the job's consumers read", job, static_cast<double>(j.epoch()));
    const int64_t pending = j.num_splits() - j.splits_completed() - j.splits_in_flight();
    for (const auto& [state, n] : {std::pair<const char*, int64_t>{"pending", pending},
                                   {"in_flight", j.splits_in_flight()},
                                   {"done", j.splits_completed()}}) {
      Labels labels = job;
      labels.push_back({"state", state});
      f.Gauge("sluice_job_splits", "the job's splits of its latest epoch, by state", labels, static_cast<double>(n));
    }
    f.Gauge("sluice_job_workers", "live workers that can run the job's pipeline", job, j.workers());
    f.Gauge("sluice_job_workers_needed",
            "workers the job needs so that its consumers need not wait (the autoscaling signal)", job,
            j.workers_needed());
  }
  f.Process();
  return f.Take();
}

std::vector<prometheus::MetricFamily> WorkerMetrics(const WorkerStatus& status) {
  MetricFamilies f;
  const Labels worker = {{"worker", std::to_string(status.worker_id())}};
  f.Counter("sluice_worker_samples_sent_total", "samples this worker sent to consumers", worker,
            static_cast<double>(status.samples_sent()));
  f.Counter("sluice_worker_bytes_sent_total", "bytes of batches this worker sent to consumers", worker,
            static_cast<double>(status.bytes_sent()));
  f.Counter("sluice_worker_samples_sent_shared_memory_total",
            "samples this worker handed to consumers on its host through shared memory", worker,
            static_cast<double>(status.samples_sent_shared_memory()));
  f.Gauge("sluice_worker_active_streams", "streams this worker is serving", worker, status.active_streams());
  const std::string engine_help = "bytes of its pipelines' buffers, in use and cached for reuse";
  f.Gauge("sluice_worker_engine_bytes", engine_help, {worker[0], {"kind", "in_use"}},
          static_cast<double>(status.engine_bytes_in_use()));
  f.Gauge("sluice_worker_engine_bytes", engine_help, {worker[0], {"kind", "cached"}},
          static_cast<double>(status.engine_bytes_cached()));
  f.Gauge("sluice_worker_pipelines", "compiled pipelines it holds (streams', or used within --idle-pipeline-timeout)",
          worker, status.pipelines());
  f.Counter("sluice_worker_object_store_retries_total",
            "object stores' transient failures (5xx, connections refused or reset, timeouts) this worker retried",
            worker, static_cast<double>(status.object_store_retries()));
  f.Errors("sluice_worker_errors_total", "streams that failed since the worker started, by status code",
           status.errors());
  f.Process();
  return f.Take();
}

}  // namespace sluice::service
