#include "sluice/cli/pipeline_runner.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sluice/cli/progress.h"
#include "sluice/core/status_macros.h"

namespace sluice::cli {

absl::StatusOr<RunReport> RunPipeline(placement::PlacedPipeline& pipeline, const RunOptions& options) {
  using Clock = std::chrono::steady_clock;
  RunReport report;
  ProgressLine progress(options.progress);
  const Clock::time_point start = Clock::now();
  Clock::time_point timed_from, last_batch_at;
  int64_t timed_samples = 0;
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  bool stop = false;
  for (int epoch = 0; !stop; ++epoch) {
    if (epoch >= options.epochs && elapsed() >= options.min_seconds) break;
    std::unique_ptr<placement::PlacedIterator> it = pipeline.Iterate(epoch);
    while (true) {
      Batch batch;
      bool end = false;
      SLUICE_RETURN_IF_ERROR(it->Next(&batch, &end));
      if (end) break;
      if (report.batches == 0) {
        timed_from = Clock::now();
        report.first_batch_ms = std::chrono::duration<double, std::milli>(timed_from - start).count();
      } else {
        timed_samples += batch.rows;
      }
      ++report.batches;
      report.samples += batch.rows;
      last_batch_at = Clock::now();
      progress.Update([&] {
        const double t = std::chrono::duration<double>(Clock::now() - timed_from).count();
        return absl::StrFormat("epoch %d  %s samples  %s samples/s", epoch + 1, WithCommas(report.samples),
                               WithCommas(t > 0 ? timed_samples / t : 0));
      });
      // Count the batch that crosses the deadline: its time is in `seconds`.
      if (options.endless && report.batches > 1 && elapsed() >= options.min_seconds) {
        stop = true;
        break;
      }
    }
    report.epochs = epoch + 1;
    report.peak_rss_after_epoch.push_back(CurrentMemoryUsage().peak_rss);
    report.skipped_records += it->skipped();
    if (it->skipped() > 0) report.skips.push_back(EpochSkips{epoch, it->skipped(), it->skip_summary()});
    report.peak_buffered_bytes = std::max(report.peak_buffered_bytes, it->peak_buffered_bytes());
  }
  progress.Finish();
  const placement::PlacedPipeline::Holdings held = pipeline.held();
  report.memory = held.pool;
  report.ring_bytes = held.rings;
  // Up to the last batch: stopping the pipeline (in-flight work) is not
  // part of its throughput.
  report.seconds = report.batches > 1 ? std::chrono::duration<double>(last_batch_at - timed_from).count() : 0;
  report.samples_per_s = report.seconds > 0 ? timed_samples / report.seconds : 0;
  return report;
}

std::string SkipWarning(const RunReport& report) {
  if (report.skips.empty()) return "";
  if (report.epochs == 1) return report.skips[0].summary;
  const bool alike = report.skips.size() == static_cast<size_t>(report.epochs) &&
                     std::all_of(report.skips.begin(), report.skips.end(),
                                 [&](const EpochSkips& s) { return s.summary == report.skips[0].summary; });
  std::string warning =
      absl::StrFormat("%d corrupt record%s skipped in %d epoch%s", report.skipped_records,
                      report.skipped_records == 1 ? "" : "s", report.skips.size(), report.skips.size() == 1 ? "" : "s");
  if (alike) return absl::StrCat(warning, ", the same in each: ", report.skips[0].summary);
  for (const EpochSkips& s : report.skips) absl::StrAppend(&warning, "\n  epoch ", s.epoch + 1, ": ", s.summary);
  return warning;
}

}  // namespace sluice::cli
