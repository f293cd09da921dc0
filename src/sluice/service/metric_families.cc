#include "sluice/service/metric_families.h"

#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <utility>

namespace sluice::service {

void MetricFamilies::Gauge(const std::string& name, const std::string& help, Labels labels, double value) {
  Add(name, help, prometheus::MetricType::Gauge, std::move(labels)).gauge.value = value;
}

void MetricFamilies::Counter(const std::string& name, const std::string& help, Labels labels, double value) {
  Add(name, help, prometheus::MetricType::Counter, std::move(labels)).counter.value = value;
}

void MetricFamilies::Errors(const std::string& name, const std::string& help,
                            const google::protobuf::Map<std::string, int64_t>& by_kind) {
  std::map<std::string, int64_t> sorted(by_kind.begin(), by_kind.end());
  for (const auto& [kind, n] : sorted) Counter(name, help, {{"kind", kind}}, static_cast<double>(n));
}

void MetricFamilies::Process() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const double cpu = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                     static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  Counter("sluice_process_cpu_seconds_total", "CPU time of this process (user and system)", {}, cpu);
  long pages = 0, resident = 0;
  std::ifstream statm("/proc/self/statm");
  if (statm >> pages >> resident) {
    Gauge("sluice_process_resident_bytes", "resident memory of this process", {},
          static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)));
  }
}

std::vector<prometheus::MetricFamily> MetricFamilies::Take() {
  std::vector<prometheus::MetricFamily> out;
  for (auto& [name, family] : families_) out.push_back(std::move(family));
  families_.clear();
  return out;
}

prometheus::ClientMetric& MetricFamilies::Add(const std::string& name, const std::string& help,
                                              prometheus::MetricType type, Labels labels) {
  prometheus::MetricFamily& family = families_[name];
  family.name = name;
  family.help = help;
  family.type = type;
  family.metric.emplace_back();
  family.metric.back().label = std::move(labels);
  return family.metric.back();
}

}  // namespace sluice::service
