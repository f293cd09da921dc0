#include "sluice/placement/pipeline_metrics.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "sluice/placement/placed_pipeline.h"
#include "sluice/service/metric_families.h"
#include "sluice/service/metrics_server.h"

namespace sluice::placement {
namespace {

using service::MetricFamilies;
using Labels = MetricFamilies::Labels;

std::atomic<bool> served{false};

struct Registry {
  absl::Mutex mu;
  int64_t next_number ABSL_GUARDED_BY(mu) = 0;
  std::vector<std::weak_ptr<const PlacedPipeline>> pipelines ABSL_GUARDED_BY(mu);
  std::unique_ptr<service::MetricsServer> server ABSL_GUARDED_BY(mu);
  std::string address ABSL_GUARDED_BY(mu);
};

Registry& TheRegistry() {
  static auto* registry = new Registry;  // never destroyed: scrapes may come during exit
  return *registry;
}

// The live pipelines, forgetting those that ended.
std::vector<std::shared_ptr<const PlacedPipeline>> LivePipelines() {
  Registry& r = TheRegistry();
  absl::MutexLock lock(&r.mu);
  std::vector<std::shared_ptr<const PlacedPipeline>> live;
  std::vector<std::weak_ptr<const PlacedPipeline>> kept;
  for (const auto& weak : r.pipelines) {
    if (std::shared_ptr<const PlacedPipeline> p = weak.lock()) {
      live.push_back(std::move(p));
      kept.push_back(weak);
    }
  }
  r.pipelines = std::move(kept);
  return live;
}

void AddDeliveries(const PlacedPipeline& p, const Labels& pipeline, MetricFamilies& f) {
  const PlacedPipeline::Deliveries d = p.delivered();
  f.Counter("sluice_pipeline_samples_total", "samples the pipeline delivered to its consumer", pipeline,
            static_cast<double>(d.samples));
  f.Counter("sluice_pipeline_elements_total", "elements (batches, or samples when unbatched) it delivered", pipeline,
            static_cast<double>(d.elements));
  f.Counter("sluice_pipeline_wait_seconds_total", "time its consumer spent waiting in next() for an element", pipeline,
            static_cast<double>(d.wait_ns) / 1e9);
}

void AddMemory(const PlacedPipeline::Memory& m, const Labels& pipeline, MetricFamilies& f) {
  const std::string help = "host bytes the pipeline's engine holds, by kind";
  for (const auto& [kind, bytes] :
       {std::pair<const char*, int64_t>{"in_use", m.in_use}, {"cached", m.cached}, {"rings", m.rings}}) {
    Labels labels = pipeline;
    labels.push_back({"kind", kind});
    f.Gauge("sluice_pipeline_engine_bytes", help, labels, static_cast<double>(bytes));
  }
  f.Gauge("sluice_pipeline_engine_peak_in_use_bytes", "the most bytes its buffers held in use at once", pipeline,
          static_cast<double>(m.peak_in_use));
  f.Gauge("sluice_pipeline_memory_budget_bytes", "its memory budget (set, or sized from the machine)", pipeline,
          static_cast<double>(m.budget));
}

// Process-wide holdings each pipeline's budget counts: reported once.
void AddProcessMemory(const PlacedPipeline::Memory& m, MetricFamilies& f) {
  const std::string help = "host bytes the engine holds for the whole process beside the pipelines' pools, by kind";
  for (const auto& [kind, bytes] : {std::pair<const char*, int64_t>{"object_blocks", m.object_blocks},
                                    {"python_shared", m.python_shared},
                                    {"mapped_files", m.mapped_files},
                                    {"columnar", m.columnar},
                                    {"arrays", m.arrays},
                                    {"staging", m.staging}}) {
    f.Gauge("sluice_process_engine_bytes", help, {{"kind", kind}}, static_cast<double>(bytes));
  }
}

void AddPlacement(const Report& r, const Labels& pipeline, MetricFamilies& f) {
  Labels info = pipeline;
  info.push_back({"mode", r.automatic ? "auto" : "manual"});
  info.push_back({"placement", r.running.Describe()});
  info.push_back({"chosen", r.placement.Describe()});
  f.Gauge("sluice_placement_info",
          "1, with where the pipeline runs now and the policy's choice (it differs while a move waits for the "
          "epoch's end) in labels",
          info, 1);
  f.Gauge("sluice_placement_threads", "compute threads in the consumer's process", pipeline, r.running.threads);
  f.Gauge("sluice_placement_local_workers", "local worker processes running its per-sample part", pipeline,
          r.running.local_workers);
  f.Gauge("sluice_placement_service_workers", "1 when the dispatcher's workers run its per-sample part", pipeline,
          r.running.service_workers ? 1 : 0);
  f.Gauge("sluice_placement_gpu_tail", "1 when the ops after the batch run on the GPU", pipeline,
          r.running.gpu_tail ? 1 : 0);
  f.Gauge("sluice_placement_keep_prefix", "1 when the deterministic prefix is kept after its first epoch", pipeline,
          r.running.keep_prefix ? 1 : 0);
  if (!r.automatic) return;
  f.Gauge("sluice_placement_judging", "1 while a move is being tried", pipeline, r.judging ? 1 : 0);
  f.Counter("sluice_placement_decisions_total", "decisions placement \"auto\" made", pipeline,
            static_cast<double>(r.decisions.size()));
  if (!r.decisions.empty()) {
    Labels last = pipeline;
    last.push_back({"decision", r.decisions.back()});
    f.Gauge("sluice_placement_last_decision_info", "the latest decision and why (1, the text in a label)", last, 1);
  }
  if (r.last.seconds > 0) {
    f.Gauge("sluice_placement_window_samples_per_second", "the last measured window: the job's rate", pipeline,
            r.last.rate);
    f.Gauge("sluice_placement_window_trainer_wait_share", "the last window: the trainer's share of time waiting",
            pipeline, r.last.wait_share);
    f.Gauge("sluice_placement_window_engine_cores", "the last window: cores the engine computed on", pipeline,
            r.last.engine_cores);
    f.Gauge("sluice_placement_window_trainer_cores", "the last window: cores the trainer used", pipeline,
            TrainerCores(r.last));
  }
  for (const Candidate& c : r.alternatives) {
    Labels labels = pipeline;
    labels.push_back({"placement", c.placement.Describe()});
    f.Gauge("sluice_placement_predicted_samples_per_second", "an alternative placement's predicted rate", labels,
            c.predicted_rate);
  }
}

}  // namespace

absl::StatusOr<int> ServePipelineMetrics(const std::string& host, int port) {
  Registry& r = TheRegistry();
  absl::MutexLock lock(&r.mu);
  if (r.server != nullptr) {
    if (port == 0 || port == r.server->port()) return r.server->port();
    return absl::FailedPreconditionError(absl::StrCat("this process already serves its metrics on ", r.address, ":",
                                                      r.server->port(), "; one endpoint per process (asked for port ",
                                                      port, ")"));
  }
  absl::StatusOr<std::unique_ptr<service::MetricsServer>> server =
      service::MetricsServer::Start(host, port, &CollectPipelineMetrics);
  if (!server.ok()) return server.status();
  r.server = *std::move(server);
  r.address = host;
  served.store(true);
  return r.server->port();
}

bool PipelineMetricsServed() { return served.load(std::memory_order_relaxed); }

int64_t RegisterForMetrics(const std::shared_ptr<const PlacedPipeline>& pipeline) {
  Registry& r = TheRegistry();
  absl::MutexLock lock(&r.mu);
  // Pipelines that ended go here too: a process that makes many and is
  // never scraped keeps none of them.
  r.pipelines.erase(std::remove_if(r.pipelines.begin(), r.pipelines.end(), [](const auto& p) { return p.expired(); }),
                    r.pipelines.end());
  r.pipelines.push_back(pipeline);
  return r.next_number++;
}

std::vector<prometheus::MetricFamily> CollectPipelineMetrics() {
  MetricFamilies f;
  const std::vector<std::shared_ptr<const PlacedPipeline>> live = LivePipelines();
  for (const auto& p : live) {
    const Labels pipeline = {{"pipeline", std::to_string(p->number())}};
    AddDeliveries(*p, pipeline, f);
    AddMemory(p->memory(), pipeline, f);
    AddPlacement(p->report(), pipeline, f);
  }
  if (!live.empty()) AddProcessMemory(live.front()->memory(), f);
  f.Gauge("sluice_pipelines", "live pipelines in this process", {}, static_cast<double>(live.size()));
  f.Process();
  return f.Take();
}

}  // namespace sluice::placement
