// sluice bench w1|w2|w5a: sluice and its peers (the expert DataLoader a
// skilled user writes: OpenCV or numpy, whole batches per task; the
// torchvision-style DataLoader; for W2 also the articles' tf.data pipeline;
// for the service bench_service.cc) side by side in one run on the same
// machine, medians of several runs, and the ratios.
#include <cstdio>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "sluice/cli/bench_util.h"
#include "sluice/cli/command.h"
#include "sluice/cli/pipeline_runner.h"
#include "sluice/cli/progress.h"
#include "sluice/cli/workloads.h"
#include "sluice/core/status_macros.h"

namespace sluice::cli {
namespace {

struct Measure {
  std::vector<double> sluice, sluice_1thread, first_batch_ms, expert, torch, tfdata;
  // What each contender hands on per sample ("float32[3,32,32]").
  std::string sluice_output, expert_output, torch_output, tfdata_output;
};

absl::StatusOr<RunReport> RunSluice(const PipelineDef& base, int threads, double seconds) {
  PipelineDef def = base;
  if (threads > 0) def.mutable_options()->set_threads(threads);
  return RunForSeconds(def, seconds);
}

// One in-process workload and its peers' scripts (in bench/peers).
struct Workload {
  PipelineDef def;
  std::string data;  // the peers' --data
  int batches;       // timed batches per peer run, unless --peer-batches
  std::string torch_script;
  std::string expert_script;  // with its arguments
  std::string expert_label;
  bool expert_uses_opencv;
  bool tfdata;  // the articles' tf.data pipeline (W2)
};

Workload WorkloadOf(const BenchArgs& args) {
  const std::string mnist = args.data + "/mnist", cifar = args.data + "/cifar10";
  if (args.workload == "w1") {
    return {W1Pipeline(mnist), mnist, 10, "w1_torch.py", "w1_expert.py", "expert: OpenCV (2 workers)", true, false};
  }
  if (args.workload == "w5a") {
    return {W5aPipeline(cifar), cifar, 100, "w5a_torch.py", "w5a_torch.py --expert", "expert: numpy (2 workers)",
            false, false};
  }
  return {W2Pipeline(cifar), cifar, 20, "w2_torch.py", "w2_opencv.py", "expert: OpenCV (2 workers)", true, true};
}

absl::Status Bench(const BenchArgs& args) {
  if (args.workload == "service") return BenchService(args);
  if (args.workload == "tuning") return BenchTuning(args);
  if (args.device != "cpu" && args.workload != "w3") {
    return absl::InvalidArgumentError(absl::StrCat("bench ", args.workload, ": --device ", args.device,
                                                   " is for w3 only (bench gpu measures the other workloads' "
                                                   "GPU tails)"));
  }
  if (args.workload == "w3") return args.device == "cuda" ? BenchW3Gpu(args) : BenchW3(args);
  if (args.workload == "gpu") return BenchGpu(args);
  const bool w1 = args.workload == "w1";
  SLUICE_RETURN_IF_ERROR(EnsureData(args.data, w1, !w1));
  const Workload w = WorkloadOf(args);
  const PipelineDef& def = w.def;
  const std::string peers = PeersDir();
  const int batches = args.peer_batches > 0 ? args.peer_batches : w.batches;
  const std::string data_arg = absl::StrCat(" --data ", w.data, " --batches ", batches);
  std::optional<std::string> torch_cmd, expert_cmd;
  std::string torch_note, tfdata_note, expert_note;
  if (!args.no_peers) {
    torch_cmd = absl::StrCat("/usr/bin/python3 ", peers, "/", w.torch_script, data_arg);
    // The OpenCV experts use Debian's python3-opencv, installed on first use.
    absl::StatusOr<std::string> py =
        w.expert_uses_opencv ? LastLineOf(peers + "/ensure_opencv.sh") : std::string("/usr/bin/python3");
    if (py.ok()) {
      expert_cmd = absl::StrCat(*py, " ", peers, "/", w.expert_script, data_arg);
    } else {
      expert_note = std::string(py.status().message());
      std::fprintf(stderr, "warning: expert peer unavailable: %s\n", expert_note.c_str());
    }
  }
  std::optional<std::string> tfdata_cmd;
  if (w.tfdata && !args.no_peers) {
    std::fprintf(stderr, "preparing the tf.data peer's virtual environment (first use installs tensorflow-cpu)\n");
    absl::StatusOr<std::string> py = LastLineOf(peers + "/ensure_peer_venv.sh");
    if (py.ok()) {
      tfdata_cmd = absl::StrCat(*py, " ", peers, "/w2_tfdata.py --data ", args.data,
                                "/cifar10 --batches ", batches);
    } else {
      tfdata_note = std::string(py.status().message());
      std::fprintf(stderr, "warning: tf.data peer unavailable: %s\n", tfdata_note.c_str());
    }
  }

  Measure m;
  SLUICE_ASSIGN_OR_RETURN(m.sluice_output, OutputOf(def, "image"));
  for (int run = 1; run <= args.runs; ++run) {
    SLUICE_ASSIGN_OR_RETURN(RunReport two, RunSluice(def, 0, args.seconds));
    SLUICE_ASSIGN_OR_RETURN(RunReport one, RunSluice(def, 1, args.seconds));
    m.sluice.push_back(two.samples_per_s);
    m.sluice_1thread.push_back(one.samples_per_s);
    m.first_batch_ms.push_back(two.first_batch_ms);
    std::string line = absl::StrFormat("run %d/%d: sluice %s samples/s (1 thread: %s)", run,
                                       args.runs, WithCommas(two.samples_per_s),
                                       WithCommas(one.samples_per_s));
    // A peer that fails is reported and left out; sluice's figures stand.
    auto run_peer = [&](std::optional<std::string>& cmd, std::string& note, const char* name,
                        std::vector<double>& into, std::string& output) {
      if (!cmd) return;
      absl::StatusOr<PeerResult> result = RunPeerResult(*cmd);
      if (!result.ok()) {
        note = std::string(result.status().message());
        std::fprintf(stderr, "warning: %s peer failed, left out: %s\n", name, note.c_str());
        cmd.reset();
        return;
      }
      into.push_back(result->samples_per_s);
      output = result->output;
      absl::StrAppend(&line, ", ", name, " ", WithCommas(result->samples_per_s));
    };
    run_peer(expert_cmd, expert_note, "expert DataLoader", m.expert, m.expert_output);
    run_peer(torch_cmd, torch_note, "torch DataLoader", m.torch, m.torch_output);
    run_peer(tfdata_cmd, tfdata_note, "tf.data", m.tfdata, m.tfdata_output);
    std::fprintf(stderr, "%s\n", line.c_str());
  }

  const double sluice = Median(m.sluice), one = Median(m.sluice_1thread);
  const double expert = Median(m.expert), torch = Median(m.torch), tfdata = Median(m.tfdata);
  std::printf("\n%s (%s), median of %d runs on %s\n", args.workload.c_str(), def.name().c_str(),
              args.runs, MachineDescription().c_str());
  std::printf("  %-26s %14s samples/s\n", "sluice", WithCommas(sluice).c_str());
  std::printf("  %-26s %14s samples/s  (2 vs 1 thread: %.2fx)\n", "sluice, 1 thread",
              WithCommas(one).c_str(), one > 0 ? sluice / one : 0);
  if (expert > 0) {
    std::printf("  %-26s %14s samples/s  (sluice: %.1fx)\n", w.expert_label.c_str(), WithCommas(expert).c_str(),
                sluice / expert);
  }
  if (torch > 0) {
    std::printf("  %-26s %14s samples/s  (sluice: %.1fx)\n", "torchvision DataLoader (2 w.)",
                WithCommas(torch).c_str(), sluice / torch);
  }
  if (tfdata > 0) {
    std::printf("  %-26s %14s samples/s  (sluice: %.1fx)\n", "tf.data (AUTOTUNE)",
                WithCommas(tfdata).c_str(), sluice / tfdata);
  }
  std::printf("  first batch after %.1f ms (median)\n", Median(m.first_batch_ms));
  bool equal = true;
  std::printf("%s\n",
              DescribeOutputs(m.sluice_output,
                              {{"expert", m.expert_output}, {"torch DataLoader", m.torch_output}, {"tf.data", m.tfdata_output}},
                              &equal)
                  .c_str());

  if (args.json) {
    nlohmann::json j;
    j["workload"] = args.workload;
    j["runs"] = args.runs;
    j["machine"] = MachineDescription();
    j["sluice_samples_per_s"] = sluice;
    j["sluice_1thread_samples_per_s"] = one;
    j["scaling_2v1"] = one > 0 ? sluice / one : 0;
    j["first_batch_ms"] = Median(m.first_batch_ms);
    j["sluice_output"] = m.sluice_output;
    j["peer_output"] = m.torch_output.empty() ? nlohmann::json(nullptr) : nlohmann::json(m.torch_output);
    j["equal_outputs"] = equal;
    j["peer_samples_per_s"] = torch > 0 ? nlohmann::json(torch) : nlohmann::json(nullptr);
    j["ratio"] = torch > 0 ? nlohmann::json(sluice / torch) : nlohmann::json(nullptr);
    if (!torch_note.empty()) j["peer_note"] = torch_note;
    j["expert_samples_per_s"] = expert > 0 ? nlohmann::json(expert) : nlohmann::json(nullptr);
    j["expert_output"] = m.expert_output.empty() ? nlohmann::json(nullptr) : nlohmann::json(m.expert_output);
    j["ratio_expert"] = expert > 0 ? nlohmann::json(sluice / expert) : nlohmann::json(nullptr);
    if (!expert_note.empty()) j["expert_note"] = expert_note;
    if (w.tfdata) {
      j["tfdata_samples_per_s"] = tfdata > 0 ? nlohmann::json(tfdata) : nlohmann::json(nullptr);
      j["tfdata_output"] = m.tfdata_output.empty() ? nlohmann::json(nullptr) : nlohmann::json(m.tfdata_output);
      j["ratio_tfdata"] = tfdata > 0 ? nlohmann::json(sluice / tfdata) : nlohmann::json(nullptr);
      if (!tfdata_note.empty()) j["tfdata_note"] = tfdata_note;
    }
    std::printf("%s\n", j.dump().c_str());
  }
  return absl::OkStatus();
}

}  // namespace

void AddBenchCommand(CLI::App& app, absl::Status* result) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "Run a reference workload with sluice and its peers side by side (medians, ratios)");
  cmd->add_option("workload", args->workload,
                  "w1 (MNIST + blur), w2 (CIFAR-10 TFRecords + augmentation), w5a (CIFAR-10's standard training "
                  "augmentation: pad + random crop, flip, normalize), w3 (JPEG class folders: decode, "
                  "random-resized-crop, flip, normalize), service (the "
                  "preprocessing service against raw gRPC, a Python gRPC feed and tf.data service) or tuning "
                  "(autotune against a sweep of hand-tuned settings, and the cost of statistics, on W1 and W2) or gpu "
                  "(the cuda kernels against the GPU's copy bandwidth and torchvision on CUDA; end to end into torch)")
      ->required()
      ->check(CLI::IsMember({"w1", "w2", "w5a", "w3", "service", "tuning", "gpu"}));
  cmd->add_option("--runs", args->runs, "runs per contender (median reported)")->default_val(3)->check(kPositive);
  cmd->add_flag("--json", args->json, "print one JSON object as the last line");
  cmd->add_option("--data", args->data, "data directory (generated when missing)")->default_val("data");
  cmd->add_option("--peer-batches", args->peer_batches, "timed batches per peer run (default 10 for w1, 20 for w2, 100 for w5a)");
  cmd->add_option("--seconds", args->seconds, "minimum seconds per sluice run")->default_val(3.0);
  cmd->add_flag("--no-peers", args->no_peers, "measure sluice only");
  cmd->add_flag("--stream-only", args->stream_only,
                "service: measure only the streaming of 1 MiB batches (over TCP and through shared memory) against "
                "the bare gRPC loop");
  cmd->add_option("--device", args->device,
                  "w3: cuda decodes the JPEGs on the GPU (nvJPEG) against torchvision's GPU decoding and sluice on "
                  "the CPU, into torch on CUDA (needs a CUDA build with nvJPEG, a GPU, torch and torchvision)")
      ->default_val("cpu")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->callback([args, result] { *result = Bench(*args); });
}

}  // namespace sluice::cli
