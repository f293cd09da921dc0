// `sluice-bench`: sluice beside its peers on the reference workloads, in one
// run on one machine, medians of several runs and the ratios. A tool of this
// checkout, built by scripts/build.sh and never installed: it runs the
// peers' scripts from bench/peers and starts the build's `sluice` command
// for the service's dispatcher and workers.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "bench_util.h"

// The build's `sluice` command (set by the build).
#ifndef SLUICE_CLI_PATH
#define SLUICE_CLI_PATH "sluice"
#endif

namespace sluice::bench {
namespace {

struct Workload {
  const char* name;
  const char* help;
  absl::Status (*run)(const BenchArgs&);
};

absl::Status BenchW3OnDevice(const BenchArgs& args) { return args.device == "cuda" ? BenchW3Gpu(args) : BenchW3(args); }

const Workload kWorkloads[] = {
    {"w1", "W1: MNIST, normalize, 11x11 blur with a random sigma, beside the expert and torchvision DataLoaders",
     BenchInProcess},
    {"w2",
     "W2: CIFAR-10 TFRecords with dilation, blur and augmentation, beside the expert and torchvision "
     "DataLoaders and tf.data",
     BenchInProcess},
    {"w5a",
     "W5a: CIFAR-10's standard training augmentation (pad + random crop, flip, normalize), beside the "
     "expert and torchvision DataLoaders",
     BenchInProcess},
    {"w3",
     "W3: JPEG class folders (decode, random-resized-crop, flip, normalize), beside torchvision, DALI's CPU "
     "pipeline and SPDL",
     BenchW3OnDevice},
    {"service", "the preprocessing service against a bare gRPC loop, the Python gRPC feed and tf.data service",
     BenchService},
    {"tuning", "autotune against a sweep of hand-tuned settings, and the cost of statistics, on W1 and W2",
     BenchTuning},
    {"gpu", "the cuda kernels against the GPU's copy bandwidth and torchvision on CUDA; end to end into torch",
     BenchGpu},
};

// Positive numbers; CLI::PositiveNumber's message prints a range up to DBL_MAX.
const CLI::Validator kPositive(
    [](std::string& value) -> std::string {
      double v = 0;
      if (!CLI::detail::lexical_cast(value, v) || !(v > 0)) return "must be > 0, got " + value;
      return "";
    },
    "> 0");

void AddOptions(const std::string& workload, CLI::App* cmd, BenchArgs* args) {
  cmd->add_option("--runs", args->runs, "runs per contender (median reported)")->default_val(3)->check(kPositive);
  cmd->add_flag("--json", args->json, "print one JSON object as the last line");
  cmd->add_option("--data", args->data, "data directory (generated when missing)")->default_val("data");
  cmd->add_option("--seconds", args->seconds, "minimum seconds per sluice run")->default_val(3.0);
  cmd->add_flag("--no-peers", args->no_peers, "measure sluice only");
  if (workload == "w1" || workload == "w2" || workload == "w5a" || workload == "service") {
    cmd->add_option("--peer-batches", args->peer_batches,
                    "timed batches per peer run (default 10 for w1, 20 for w2, 100 for w5a)");
  }
  if (workload == "service") {
    cmd->add_flag("--stream-only", args->stream_only,
                  "measure only the streaming of 1 MiB batches (over TCP and through shared memory) against the "
                  "bare gRPC loop");
  }
  if (workload == "w3") {
    cmd->add_option("--device", args->device,
                    "cuda decodes the JPEGs on the GPU (nvJPEG) against torchvision's GPU decoding and sluice on "
                    "the CPU, into torch on CUDA (needs a CUDA build with nvJPEG, a GPU, torch and torchvision)")
        ->default_val("cpu")
        ->check(CLI::IsMember({"cpu", "cuda"}));
  }
}

}  // namespace
}  // namespace sluice::bench

int main(int argc, char** argv) {
  using namespace sluice::bench;
  // The service's dispatcher and workers, and the local workers of
  // pipelines, are the build's `sluice` unless the caller names another.
  ::setenv("SLUICE_BINARY", SLUICE_CLI_PATH, /*overwrite=*/0);
  CLI::App app{
      "sluice-bench: sluice and its peers side by side on the reference workloads (medians of --runs, ratios).\n"
      "Peers run from bench/peers; the tf.data, DALI and SPDL peers install into their own virtual environments\n"
      "under ~/.cache/sluice on first use. Results go to bench/RESULTS.md by hand, with the machine and date."};
  app.require_subcommand(1);
  absl::Status result;
  auto args = std::make_shared<BenchArgs>();
  for (const Workload& w : kWorkloads) {
    CLI::App* cmd = app.add_subcommand(w.name, w.help);
    AddOptions(w.name, cmd, args.get());
    cmd->callback([&result, args, w] {
      args->workload = w.name;
      result = w.run(*args);
    });
  }
  app.add_subcommand("raw-stream-server", "the bare gRPC loop's server that `service` starts in a process of its own")
      ->callback([&result] { result = ServeRawStream(); });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (!result.ok()) {
    std::fprintf(stderr, "sluice-bench %s: error: %s\n", app.get_subcommands()[0]->get_name().c_str(),
                 result.ToString().c_str());
    return 1;
  }
  return 0;
}
