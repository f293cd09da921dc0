#include "sluice/profile/report_html.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"

namespace sluice::profile {
namespace {

std::string Escape(const std::string& s) {
  return absl::StrReplaceAll(s, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}});
}

constexpr int kWidth = 720, kHeight = 200, kMargin = 48;

// A line chart of one series, with its axes' ranges written on them.
std::string LineChart(const Series& series, const std::string& unit) {
  if (series.points.size() < 2) return "<p>(too short a run for a chart)</p>";
  double t_max = 0, v_max = 0;
  for (const auto& [t, v] : series.points) {
    t_max = std::max(t_max, t);
    v_max = std::max(v_max, v);
  }
  if (t_max <= 0 || v_max <= 0) return "<p>(nothing to chart)</p>";
  std::string points;
  for (const auto& [t, v] : series.points) {
    absl::StrAppendFormat(&points, "%.1f,%.1f ", kMargin + t / t_max * (kWidth - kMargin - 8),
                          kHeight - 24 - v / v_max * (kHeight - 40));
  }
  return absl::StrFormat(
      "<svg width=\"%d\" height=\"%d\" role=\"img\" aria-label=\"%s over time\">"
      "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" class=\"axis\"/>"
      "<line x1=\"%d\" y1=\"16\" x2=\"%d\" y2=\"%d\" class=\"axis\"/>"
      "<text x=\"2\" y=\"20\">%s</text><text x=\"2\" y=\"%d\">0</text>"
      "<text x=\"%d\" y=\"%d\">%.1f s</text>"
      "<polyline points=\"%s\" class=\"line\"/></svg>",
      kWidth, kHeight, Escape(series.name), kMargin, kHeight - 24, kWidth - 8, kHeight - 24, kMargin, kMargin,
      kHeight - 24, Escape(ShortRate(v_max) + " " + unit), kHeight - 24, kWidth - 48, kHeight - 6, t_max, points);
}

// Horizontal bars: each op's share of the CPU.
std::string CostBars(const std::vector<OpCost>& ops) {
  std::vector<const OpCost*> shown;
  for (const OpCost& op : ops) {
    if (op.cpu_share > 0.001) shown.push_back(&op);
  }
  std::sort(shown.begin(), shown.end(), [](const OpCost* a, const OpCost* b) { return a->cpu_share > b->cpu_share; });
  const int row = 24, label = 220;
  std::string svg = absl::StrFormat("<svg width=\"%d\" height=\"%d\" role=\"img\" aria-label=\"share of CPU per op\">",
                                    kWidth, static_cast<int>(shown.size()) * row + 8);
  for (size_t i = 0; i < shown.size(); ++i) {
    const OpCost& op = *shown[i];
    const double w = op.cpu_share * (kWidth - label - 60);
    absl::StrAppendFormat(&svg,
                          "<text x=\"0\" y=\"%d\">%s</text><rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"16\" "
                          "class=\"bar\"/><text x=\"%.1f\" y=\"%d\">%.0f%%</text>",
                          static_cast<int>(i) * row + 18, Escape(op.node_name + " · " + op.op_name), label,
                          static_cast<int>(i) * row + 4, w, label + w + 6, static_cast<int>(i) * row + 18,
                          100 * op.cpu_share);
  }
  return svg + "</svg>";
}

const Series* Find(const std::vector<Series>& all, const std::string& name) {
  for (const Series& s : all) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

constexpr char kStyle[] =
    "body{font:15px/1.45 system-ui,sans-serif;max-width:800px;margin:2em auto;color:#222}"
    "h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.6em}"
    ".verdict{font-size:1.15em;background:#f3f6fb;border-left:4px solid #3465a4;padding:.8em 1em}"
    "table{border-collapse:collapse}td,th{padding:.2em .7em;text-align:right;border-bottom:1px solid #ddd}"
    "td:first-child,th:first-child{text-align:left}svg text{font-size:12px;fill:#444}"
    ".axis{stroke:#999}.line{fill:none;stroke:#3465a4;stroke-width:1.5}.bar{fill:#3465a4}";

void AppendHead(const ProfileResult& r, std::string* html) {
  const Findings& f = r.findings;
  absl::StrAppend(html, "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>sluice profile: ",
                  Escape(f.pipeline), "</title><style>", kStyle, "</style></head><body>",
                  "<h1>sluice profile: ", Escape(f.pipeline), "</h1>", "<p class=\"verdict\">",
                  Escape(r.verdict.summary), "</p>");
  if (!r.note.empty()) absl::StrAppend(html, "<p><em>", Escape(r.note), "</em></p>");
}

void AppendLevers(const ProfileResult& r, std::string* html) {
  absl::StrAppend(html, "<h2>Levers</h2>");
  if (r.verdict.levers.empty()) {
    absl::StrAppend(html, "<p>None needed.</p>");
    return;
  }
  absl::StrAppend(html, "<table><tr><th>lever</th><th>predicted samples/s</th><th>why</th></tr>");
  for (const Lever& l : r.verdict.levers) {
    absl::StrAppend(html, "<tr><td>", Escape(l.action), "</td><td>",
                    l.predicted_samples_per_s > 0 ? ShortRate(l.predicted_samples_per_s) : "—", "</td><td>",
                    Escape(l.why), "</td></tr>");
  }
  absl::StrAppend(html, "</table>");
}

void AppendMeasurements(const Findings& f, std::string* html) {
  absl::StrAppendFormat(html,
                        "<h2>Measurements</h2><table>"
                        "<tr><td>whole pipeline</td><td>%s samples/s</td></tr>"
                        "<tr><td>source alone (reading and parsing)</td><td>%s samples/s</td></tr>"
                        "<tr><td>CPU per sample</td><td>%.1f core-µs</td></tr>"
                        "<tr><td>threads</td><td>%d</td></tr>",
                        ShortRate(f.samples_per_s), ShortRate(f.input_only_samples_per_s), f.cpu_s_per_sample * 1e6,
                        f.threads);
  if (f.consumer_samples_per_s > 0) {
    absl::StrAppendFormat(html,
                          "<tr><td>trainer's rate</td><td>%s samples/s</td></tr>"
                          "<tr><td>trainer waiting, paced at that rate</td><td>%.0f%%</td></tr>",
                          ShortRate(f.consumer_samples_per_s), 100 * f.paced_wait_share);
  }
  absl::StrAppend(html, "</table>");
}

void AppendCosts(const ProfileResult& r, std::string* html) {
  const Findings& f = r.findings;
  if (const Series* rate = Find(r.full.series, "samples/s")) {
    absl::StrAppend(html, "<h2>Throughput over time</h2>", LineChart(*rate, "samples/s"));
  }
  absl::StrAppend(html, "<h2>Where the CPU goes</h2>", CostBars(f.ops),
                  "<table><tr><th>node · op</th><th>core-s per 1,000 samples</th><th>share of CPU</th>"
                  "<th>samples/s without it</th></tr>");
  for (const OpCost& op : f.ops) {
    absl::StrAppendFormat(html, "<tr><td>%s</td><td>%.4f</td><td>%.1f%%</td><td>%s</td></tr>",
                          Escape(op.node_name + " · " + op.op_name + (op.view ? " (view)" : "")), op.core_s_per_1k,
                          100 * op.cpu_share, op.ablated_samples_per_s > 0 ? ShortRate(op.ablated_samples_per_s) : "—");
  }
  absl::StrAppend(html, "</table>");
}

void AppendNodes(const ProfileResult& r, std::string* html) {
  const double seconds = std::max(r.full.seconds, 1e-9);
  absl::StrAppend(html,
                  "<h2>Nodes</h2><p>Seconds per second of the run, summed over a node's threads.</p>"
                  "<table><tr><th>node</th><th>elements</th><th>computing</th><th>waiting for input</th>"
                  "<th>waiting for room</th></tr>");
  for (const exec::NodeStatsSnapshot& n : r.full.nodes) {
    absl::StrAppendFormat(html, "<tr><td>%s</td><td>%d</td><td>%.2f</td><td>%.2f</td><td>%.2f</td></tr>",
                          Escape(n.name), n.elements, n.busy_ns * 1e-9 / seconds, n.input_wait_ns * 1e-9 / seconds,
                          n.output_wait_ns * 1e-9 / seconds);
  }
  absl::StrAppend(html, "</table>");
}

void AppendAutotune(const ProfileResult& r, std::string* html) {
  if (r.full.tuned.empty()) return;
  absl::StrAppend(html, "<h2>Autotune</h2><table><tr><th>knob</th><th>value</th></tr>");
  for (const exec::Knob& k : r.full.tuned) {
    absl::StrAppend(html, "<tr><td>", Escape(k.node_name),
                    k.kind == exec::Knob::Kind::kParallelism ? " parallelism" : " depth", "</td><td>", k.value,
                    "</td></tr>");
  }
  absl::StrAppend(html, "</table>");
  if (r.full.tune_log.empty()) return;
  absl::StrAppend(html, "<ul>");
  for (const std::string& line : r.full.tune_log) absl::StrAppend(html, "<li>", Escape(line), "</li>");
  absl::StrAppend(html, "</ul>");
}

}  // namespace

std::string HtmlReport(const ProfileResult& r) {
  std::string html;
  AppendHead(r, &html);
  AppendLevers(r, &html);
  AppendMeasurements(r.findings, &html);
  AppendCosts(r, &html);
  AppendNodes(r, &html);
  AppendAutotune(r, &html);
  absl::StrAppend(&html, "</body></html>\n");
  return html;
}

}  // namespace sluice::profile
