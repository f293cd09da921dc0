// sluice run PIPELINE.json: iterate a pipeline and report its throughput.
#include <cstdio>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "sluice/cli/command.h"
#include "sluice/cli/pipeline_runner.h"
#include "sluice/cli/plugins.h"
#include "sluice/cli/progress.h"
#include "sluice/cli/run_resumable.h"
#include "sluice/core/python_process.h"
#include "sluice/core/status_macros.h"
#include "sluice/graph/pipeline_json.h"
#include "sluice/io/arrow_source.h"
#include "sluice/io/object_cache.h"
#include "sluice/io/object_store.h"
#include "sluice/kernels/simd.h"
#include "sluice/placement/pipeline_metrics.h"
#include "sluice/placement/placed_pipeline.h"

namespace sluice::cli {
namespace {

struct RunArgs {
  std::string pipeline;
  int epochs = 1;
  bool epochs_given = false;  // --epochs on the command line
  int threads = 0;
  std::string seed;  // empty: the pipeline's
  bool json = false;
  bool quiet = false;
  ResumableRun resumable;
  std::vector<std::string> plugins;
  int metrics_port = -1;
  std::string metrics_host = "127.0.0.1";
};

// "2 threads, memory budget 256 MiB (1/128 of 23.5 GiB for 1 rank)".
std::string DescribeSettings(const graph::CompiledPipeline& c) {
  const std::string budget = c.memory_budget_default.empty()
                                 ? absl::StrCat(InBinaryUnits(c.memory_budget_bytes), " (set)")
                                 : c.memory_budget_default;
  return absl::StrFormat("%d thread%s, memory budget %s", c.threads, c.threads == 1 ? "" : "s", budget);
}

std::vector<double> RssMb(const RunReport& r) {
  std::vector<double> mb;
  for (int64_t b : r.peak_rss_after_epoch) mb.push_back(b / 1e6);  // MB, as the engine's figures
  return mb;
}

void PrintSummary(const std::string& path, const graph::CompiledPipeline& c, const RunReport& r) {
  const std::vector<double> rss_mb = RssMb(r);
  // The rate is the steady one: from the first batch to the last (the
  // first batch's latency is its own line).
  const std::string rate = r.batches > 1 ? absl::StrFormat("%.2f s after the first batch: %s samples/s", r.seconds,
                                                           WithCommas(r.samples_per_s))
                                         : std::string(r.batches != 1 ? "no rate"
                                                       : c.batched()  ? "one batch, too few for a rate"
                                                                      : "one sample, too few for a rate");
  // Without a batch node each element is a sample: no count of batches.
  const std::string batches =
      c.batched() ? absl::StrCat(" (", WithCommas(r.batches), r.batches == 1 ? " batch)" : " batches)") : "";
  std::printf("%s: %s sample%s in %d epoch%s%s, %s on %d thread%s (%s)\n", path.c_str(), WithCommas(r.samples).c_str(),
              r.samples == 1 ? "" : "s", r.epochs, r.epochs == 1 ? "" : "s", batches.c_str(), rate.c_str(), c.threads,
              c.threads == 1 ? "" : "s", kernels::SimdTarget().c_str());
  const std::string first =
      r.batches > 0 ? absl::StrFormat("first batch after %.1f ms", r.first_batch_ms) : "nothing delivered";
  std::printf("%s; peak RSS %.1f MB after epoch 1, %.1f MB at the end\n", first.c_str(), rss_mb.front(), rss_mb.back());
  std::printf("engine's buffers: at most %.1f MB held (%.1f MB in use at once), %.1f MB cached at the end",
              r.memory.peak_held_bytes / 1e6, r.memory.peak_live_bytes / 1e6, r.memory.cached_bytes / 1e6);
  if (r.ring_bytes > 0) std::printf("; %.1f MB of shared-memory rings", r.ring_bytes / 1e6);
  if (const int64_t columnar = io::ColumnarPeakBytes(); columnar > 0) {
    std::printf("; at most %.1f MB of decoded row groups", columnar / 1e6);
  }
  if (const int64_t shared = PythonSharedPeakBytes(); shared > 0) {
    std::printf("; at most %.1f MB shared with Python processes", shared / 1e6);
  }
  std::printf("\n");
  // Retries count too where the cache served every object's bytes.
  if (const int64_t blocks = io::ObjectBlockPeakBytes(); blocks > 0 || io::ObjectStoreRetries() > 0) {
    std::printf(
        "object stores: at most %.1f MB of blocks fetched ahead, %lld objects opened ahead of their reader, %lld "
        "transient failures retried\n",
        blocks / 1e6, static_cast<long long>(io::ObjectsOpenedAhead()),
        static_cast<long long>(io::ObjectStoreRetries()));
  }
  if (const std::shared_ptr<io::ObjectCache> cache = io::ObjectCache::Get()) {
    const io::ObjectCache::Stats s = cache->stats();
    std::printf(
        "object cache %s: %lld hits, %lld misses, %lld corrupt entries fetched again, %lld evicted, %lld objects not "
        "cached, %.1f MB held\n",
        cache->dir().c_str(), static_cast<long long>(s.hits), static_cast<long long>(s.misses),
        static_cast<long long>(s.corrupt), static_cast<long long>(s.evicted), static_cast<long long>(s.uncacheable),
        s.bytes / 1e6);
  }
}

void PrintJson(const std::string& path, const graph::CompiledPipeline& c, const RunReport& r,
               const placement::Report& placement) {
  const std::shared_ptr<io::ObjectCache> object_cache = io::ObjectCache::Get();
  const io::ObjectCache::Stats cache = object_cache != nullptr ? object_cache->stats() : io::ObjectCache::Stats{};
  const std::string rss_mb =
      absl::StrJoin(RssMb(r), ", ", [](std::string* out, double v) { out->append(absl::StrFormat("%.1f", v)); });
  std::printf(
      "{\"pipeline\": %s, \"epochs\": %d, \"samples\": %lld, \"batches\": %lld, "
      "\"seconds\": %.4f, \"samples_per_s\": %.1f, \"first_batch_ms\": %.2f, \"threads\": %d, \"simd\": \"%s\", "
      "\"skipped_records\": %lld, \"peak_buffered_bytes\": %lld, \"memory_budget_bytes\": %lld, "
      "\"engine_peak_bytes\": %zu, \"engine_peak_in_use_bytes\": %zu, \"engine_cached_bytes\": %zu, "
      "\"engine_ring_bytes\": %lld, \"object_store_retries\": %lld, \"object_block_peak_bytes\": %lld, "
      "\"python_shared_peak_bytes\": %lld, \"columnar_peak_bytes\": %lld, \"object_cache_hits\": %lld, "
      "\"object_cache_misses\": %lld, "
      "\"peak_rss_mb_after_epoch\": [%s], \"placement\": %s}\n",
      nlohmann::json(path).dump().c_str(), r.epochs, static_cast<long long>(r.samples),
      static_cast<long long>(r.batches), r.seconds, r.samples_per_s, r.first_batch_ms, c.threads,
      kernels::SimdTarget().c_str(), static_cast<long long>(r.skipped_records),
      static_cast<long long>(r.peak_buffered_bytes), static_cast<long long>(c.memory_budget_bytes),
      r.memory.peak_held_bytes, r.memory.peak_live_bytes, r.memory.cached_bytes, static_cast<long long>(r.ring_bytes),
      static_cast<long long>(io::ObjectStoreRetries()), static_cast<long long>(io::ObjectBlockPeakBytes()),
      static_cast<long long>(PythonSharedPeakBytes()), static_cast<long long>(io::ColumnarPeakBytes()),
      static_cast<long long>(cache.hits), static_cast<long long>(cache.misses), rss_mb.c_str(),
      placement.ToJson().c_str());
}

absl::Status Run(const RunArgs& args) {
  SLUICE_RETURN_IF_ERROR(LoadPlugins(args.plugins));
  SLUICE_ASSIGN_OR_RETURN(PipelineDef def, graph::PipelineFromJsonFile(args.pipeline));
  if (args.metrics_port >= 0) {
    SLUICE_ASSIGN_OR_RETURN(const int port, placement::ServePipelineMetrics(args.metrics_host, args.metrics_port));
    // stderr: a --json line on stdout stays the last, and port 0's choice is still seen.
    std::fprintf(stderr, "metrics on http://%s:%d/metrics\n", args.metrics_host.c_str(), port);
  }
  if (args.threads > 0) def.mutable_options()->set_threads(args.threads);
  if (!args.seed.empty()) {
    uint64_t seed = 0;
    (void)absl::SimpleAtoi(args.seed, &seed);  // kSeed checked it
    def.set_seed(seed);
  }
  absl::StatusOr<std::shared_ptr<placement::PlacedPipeline>> pipeline = placement::PlacedPipeline::Create(def);
  if (!pipeline.ok()) return WithContext(pipeline.status(), args.pipeline);
  const graph::CompiledPipeline& c = (*pipeline)->first().compiled();
  if (!args.quiet) {
    std::printf("%s: %s\n", args.pipeline.c_str(), DescribeSettings(c).c_str());
    std::fflush(stdout);  // first in a log that takes stdout and stderr, not after the run's own lines
  }
  const ResumableRun& part = args.resumable;
  if (!part.resume.empty() || !part.save_state.empty() || part.stop_after > 0) {
    if (!part.save_state.empty() && part.stop_after <= 0) {
      return absl::InvalidArgumentError(
          "--save-state needs --stop-after N: the state of a finished epoch says nothing");
    }
    if (args.epochs_given) {
      return absl::InvalidArgumentError(
          "--epochs with --stop-after or --resume: a run in parts is one epoch (epoch 0, or the rest of the one the "
          "state was saved in); run later epochs without them");
    }
    return RunResumable((*pipeline)->first(), args.pipeline, part);
  }
  RunOptions options;
  options.epochs = args.epochs;
  options.progress = !args.quiet;
  SLUICE_ASSIGN_OR_RETURN(RunReport r, RunPipeline(**pipeline, options));
  if (r.skipped_records > 0) std::fprintf(stderr, "warning: %s\n", SkipWarning(r).c_str());
  if (r.batches == 0 && r.skipped_records == 0) {
    std::fprintf(stderr,
                 "warning: the pipeline yielded nothing (a batch with drop_remainder larger than the epoch, a filter "
                 "that keeps no sample, a take of 0?)\n");
  }
  if (!args.quiet) {
    PrintSummary(args.pipeline, c, r);
    if ((*pipeline)->automatic()) std::printf("%s", (*pipeline)->report().ToText().c_str());
  }
  if (args.json) PrintJson(args.pipeline, c, r, (*pipeline)->report());
  return absl::OkStatus();
}

}  // namespace

void AddRunCommand(CLI::App& app, absl::Status* result) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand("run", "Run a pipeline (JSON PipelineDef) and report samples/s");
  cmd->add_option("pipeline", args->pipeline, "pipeline definition (JSON)")->required();
  CLI::Option* epochs = cmd->add_option("--epochs", args->epochs, "epochs to run")->default_val(1)->check(kPositive);
  cmd->add_option("--threads", args->threads, "compute threads (default: the pipeline's, or all cores)")
      ->check(kThreadCount);
  cmd->add_option("--seed", args->seed, "override the pipeline's seed (0 to 2^64-1)")->check(kSeed);
  cmd->add_flag("--json", args->json, "print a JSON summary as the last line");
  cmd->add_flag("--quiet", args->quiet, "no progress line or text summary");
  cmd->add_option("--stop-after", args->resumable.stop_after,
                  "stop epoch 0 after N elements (batches, or samples when unbatched)")
      ->check(kPositive);
  cmd->add_option("--save-state", args->resumable.save_state,
                  "write where the epoch stands when the run stops to FILE (needs --stop-after)");
  cmd->add_option("--resume", args->resumable.resume,
                  "go on with the epoch a --save-state FILE stopped in: exactly the elements that were left");
  cmd->add_option("--metrics-port", args->metrics_port,
                  "serve the pipeline's Prometheus metrics (rate, wait, memory, placement) on "
                  "http://HOST:PORT/metrics while it runs (0: any free port, printed; default: none)")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--metrics-host", args->metrics_host, "the address the metrics listen on")->default_val("127.0.0.1");
  AddPluginOption(cmd, &args->plugins);
  cmd->callback([args, result, epochs] {
    args->resumable.quiet = args->quiet;
    args->resumable.json = args->json;
    args->epochs_given = epochs->count() > 0;
    *result = Run(*args);
  });
}

}  // namespace sluice::cli
