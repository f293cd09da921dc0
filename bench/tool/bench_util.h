// What the benchmarks of sluice-bench share: their arguments, running peers (scripts whose
// last stdout line is a JSON result), medians, the machine's description
// and the reference data.
#ifndef SLUICE_BENCH_TOOL_BENCH_UTIL_H_
#define SLUICE_BENCH_TOOL_BENCH_UTIL_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "pipeline.pb.h"
#include "sluice/cli/pipeline_runner.h"
#include "sluice/cli/progress.h"

namespace sluice::bench {

// The command line's pieces the benches run pipelines and report with.
using cli::CurrentMemoryUsage;
using cli::MemoryUsage;
using cli::ProgressLine;
using cli::RunOptions;
using cli::RunPipeline;
using cli::RunReport;
using cli::WithCommas;

struct BenchArgs {
  std::string workload;
  int runs = 3;
  bool json = false;
  std::string data = "data";
  int peer_batches = 0;
  double seconds = 3;
  bool no_peers = false;
  bool stream_only = false;    // service: the stream against the bare gRPC loop, nothing else
  std::string device = "cpu";  // w3: where the images are decoded
};

bool Exists(const std::string& path);
// bench/peers, or $SLUICE_BENCH_DIR.
std::string PeersDir();
// Runs `command`, echoing its stderr, and returns the last line of stdout.
absl::StatusOr<std::string> LastLineOf(const std::string& command);
// A peer's "samples_per_s" (the JSON object on its last stdout line).
absl::StatusOr<double> RunPeer(const std::string& command);
// The same, with what the peer hands on per sample ("output":
// "float32[3,32,32]"; empty when it does not say).
struct PeerResult {
  double samples_per_s = 0;
  std::string output;
};
absl::StatusOr<PeerResult> RunPeerResult(const std::string& command);
// The JSON object a Python script of bench/peers prints last, run with
// `python3` and `args`; null (saying why on stderr) when it gives none.
nlohmann::json PythonPeerJson(const std::string& script, const std::string& args);
// What `def` hands on per sample in `column`, in the peers' notation.
absl::StatusOr<std::string> OutputOf(const PipelineDef& def, const std::string& column);
// "  outputs per sample: sluice float32[3,32,32]; torch float32[3,32,32]":
// ratios mean something only between equal outputs. Peers that did not say
// are left out; *equal tells whether every other one matched sluice's.
std::string DescribeOutputs(const std::string& sluice, const std::vector<std::pair<std::string, std::string>>& peers,
                            bool* equal);
double Median(std::vector<double> v);
std::string MachineDescription();
// Writes the W1 (MNIST) and W2 (CIFAR-10 TFRecords) data under `data` if missing.
absl::Status EnsureData(const std::string& data, bool w1, bool w2);

// One epoch of `def` in this process, and more until `seconds` passed.
// `endless`: the pipeline repeats forever (RunOptions::endless).
absl::StatusOr<RunReport> RunForSeconds(const PipelineDef& def, double seconds, bool endless = false);

// sluice-bench w1|w2|w5a (bench.cc).
absl::Status BenchInProcess(const BenchArgs& args);
// sluice-bench service (bench_service.cc), and the bare gRPC loop's server
// it starts (sluice-bench raw-stream-server).
absl::Status BenchService(const BenchArgs& args);
absl::Status ServeRawStream();
// This executable's path, to start its own subcommands in processes.
absl::StatusOr<std::string> SelfPath();
// sluice-bench tuning (bench_tuning.cc).
absl::Status BenchTuning(const BenchArgs& args);
// sluice-bench gpu (bench_gpu.cc).
absl::Status BenchGpu(const BenchArgs& args);
// sluice-bench w3 (bench_w3.cc), and with --device cuda (bench_w3_gpu.cc).
absl::Status BenchW3(const BenchArgs& args);
absl::Status BenchW3Gpu(const BenchArgs& args);

}  // namespace sluice::bench

#endif  // SLUICE_BENCH_TOOL_BENCH_UTIL_H_
