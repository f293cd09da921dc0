// sluice.Pipeline.profile() and .materialize(): the profiler's runs and
// reports, and the materializer, with the GIL released while they work.
#include <algorithm>
#include <atomic>

#include "bindings.h"
#include "gil.h"
#include "interrupt.h"
#include "sluice/graph/pipeline_json.h"
#include "sluice/profile/materialize.h"
#include "sluice/profile/profiler.h"
#include "sluice/profile/report_html.h"
#include "sluice/profile/report_json.h"
#include "sluice/profile/trace_writer.h"

namespace sluice::python {
namespace {

// (the profile as JSON, the Chrome trace or "", the HTML report or "").
py::tuple Profile(const std::string& json, double consumer_rate, double target_rate, double seconds, bool ablation,
                  bool trace, bool report) {
  absl::StatusOr<profile::ProfileResult> result;
  std::string profile_json, trace_json, html;
  std::atomic<bool> cancelled{false};
  InterruptScope interrupt([&cancelled] { cancelled.store(true); });
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  WithoutGil([&] {
    absl::StatusOr<PipelineDef> def = graph::PipelineFromJson(json);
    if (def.ok()) {
      profile::ProfileOptions options;
      options.seconds = seconds;
      options.short_seconds = std::max(0.5, seconds / 3);
      options.consumer_samples_per_s = consumer_rate;
      options.target_samples_per_s = target_rate;
      options.ablation = ablation;
      options.trace = trace;
      options.cancelled = &cancelled;
      result = profile::RunProfile(*def, options, [](const std::string&) {});
    } else {
      result = def.status();
    }
    if (result.ok()) {
      profile_json = profile::JsonReport(*result);
      if (trace) trace_json = profile::ChromeTraceJson(*result);
      if (report) html = profile::HtmlReport(*result);
    }
  });
  if (interrupt.interrupted()) RaiseInterrupt();
  ThrowIfError(result.status());
  return py::make_tuple(profile_json, trace_json, html);
}

// The rewritten pipeline's JSON.
std::string Materialize(const std::string& json, const std::string& out_dir) {
  absl::StatusOr<profile::MaterializeResult> result;
  WithoutGil([&] {
    absl::StatusOr<PipelineDef> def = graph::PipelineFromJson(json);
    result = def.ok() ? profile::Materialize(*def, out_dir, [](int64_t) {}) : def.status();
  });
  ThrowIfError(result.status());
  return graph::PipelineToJson(result->rewritten);
}

}  // namespace

void InitProfile(py::module_& m) {
  m.def("profile", &Profile, py::arg("json"), py::arg("consumer_rate"), py::arg("target_rate"), py::arg("seconds"),
        py::arg("ablation"), py::arg("trace"), py::arg("report"));
  m.def("materialize", &Materialize, py::arg("json"), py::arg("out_dir"));
}

}  // namespace sluice::python
