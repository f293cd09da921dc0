#include "sluice/service/service_metrics.h"

#include <map>
#include <string>

#include "gtest/gtest.h"

namespace sluice::service {
namespace {

// "name{k=v,...}" -> value, for every metric of `families`.
std::map<std::string, double> Flatten(const std::vector<prometheus::MetricFamily>& families) {
  std::map<std::string, double> out;
  for (const prometheus::MetricFamily& f : families) {
    for (const prometheus::ClientMetric& m : f.metric) {
      std::string key = f.name + "{";
      for (const auto& label : m.label) key += label.name + "=" + label.value + ",";
      key += "}";
      out[key] = f.type == prometheus::MetricType::Counter ? m.counter.value : m.gauge.value;
    }
  }
  return out;
}

TEST(ServiceMetrics, TheDispatchersStatusBecomesLabelledSeries) {
  DispatcherStatus status;
  status.set_pipelines(2);
  status.set_journal_bytes(4096);
  WorkerStatusEntry* w = status.add_workers();
  w->set_worker_id(7);
  w->set_address("10.0.0.7:7071");
  w->set_samples_per_s(1500);
  JobStatusEntry* j = status.add_jobs();
  j->set_job_id(3);
  j->set_job_name("train");
  j->set_clients(2);
  j->set_samples_per_s(3000);
  j->set_wait_share(0.25);
  j->set_num_splits(10);
  j->set_splits_completed(6);
  j->set_splits_in_flight(3);
  j->set_workers_needed(2);
  j->set_workers(1);
  (*status.mutable_errors())["worker_lost"] = 4;
  const std::map<std::string, double> m = Flatten(DispatcherMetrics(status));
  EXPECT_EQ(m.at("sluice_workers{}"), 1);
  EXPECT_EQ(m.at("sluice_pipelines{}"), 2);
  EXPECT_EQ(m.at("sluice_journal_bytes{}"), 4096);
  EXPECT_EQ(m.at("sluice_worker_samples_per_second{worker=7,address=10.0.0.7:7071,}"), 1500);
  EXPECT_EQ(m.at("sluice_job_clients{job=train,job_id=3,}"), 2);
  EXPECT_EQ(m.at("sluice_job_client_wait_share{job=train,job_id=3,}"), 0.25);
  EXPECT_EQ(m.at("sluice_job_splits{job=train,job_id=3,state=pending,}"), 1);
  EXPECT_EQ(m.at("sluice_job_splits{job=train,job_id=3,state=in_flight,}"), 3);
  EXPECT_EQ(m.at("sluice_job_splits{job=train,job_id=3,state=done,}"), 6);
  EXPECT_EQ(m.at("sluice_job_workers_needed{job=train,job_id=3,}"), 2);
  EXPECT_EQ(m.at("sluice_job_workers{job=train,job_id=3,}"), 1);
  EXPECT_EQ(m.at("sluice_errors_total{kind=worker_lost,}"), 4);
  EXPECT_GT(m.at("sluice_process_resident_bytes{}"), 0);
}

TEST(ServiceMetrics, AnUnnamedJobIsLabelledByItsIdAndWorkersCountFailedStreams) {
  DispatcherStatus status;
  status.add_jobs()->set_job_id(12);
  EXPECT_EQ(Flatten(DispatcherMetrics(status)).count("sluice_job_clients{job=12,job_id=12,}"), 1u);

  WorkerStatus worker;
  worker.set_worker_id(5);
  worker.set_samples_sent(1000);
  (*worker.mutable_errors())["DATA_LOSS"] = 2;
  const std::map<std::string, double> m = Flatten(WorkerMetrics(worker));
  EXPECT_EQ(m.at("sluice_worker_samples_sent_total{worker=5,}"), 1000);
  EXPECT_EQ(m.at("sluice_worker_errors_total{kind=DATA_LOSS,}"), 2);
}

}  // namespace
}  // namespace sluice::service
