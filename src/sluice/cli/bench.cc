// sluice bench w1|w2: sluice and its peers (torch DataLoader; for W2 also the
// articles' tf.data pipeline) side by side in one run on the same machine,
// medians of several runs, and the ratios.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "sluice/cli/command.h"
#include "sluice/cli/pipeline_runner.h"
#include "sluice/cli/progress.h"
#include "sluice/cli/synthetic_data.h"
#include "sluice/cli/workloads.h"
#include "sluice/core/status_macros.h"

#ifndef SLUICE_SOURCE_DIR
#define SLUICE_SOURCE_DIR "."
#endif

namespace sluice::cli {
namespace {

struct BenchArgs {
  std::string workload;
  int runs = 3;
  bool json = false;
  std::string data = "data";
  int peer_batches = 0;
  double seconds = 3;
  bool no_peers = false;
};

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string PeersDir() {
  const char* env = std::getenv("SLUICE_BENCH_DIR");
  return env != nullptr ? std::string(env) : std::string(SLUICE_SOURCE_DIR) + "/bench/peers";
}

// Runs `command`, echoing its stderr, and returns the last line of stdout.
absl::StatusOr<std::string> LastLineOf(const std::string& command) {
  std::FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) return absl::UnavailableError(absl::StrCat("cannot run: ", command));
  std::string last, line;
  std::array<char, 4096> buf;
  while (std::fgets(buf.data(), buf.size(), p) != nullptr) {
    line += buf.data();
    if (!line.empty() && line.back() == '\n') {
      line.pop_back();
      if (!line.empty()) last = line;
      line.clear();
    }
  }
  if (!line.empty()) last = line;
  const int rc = ::pclose(p);
  if (rc != 0) {
    return absl::UnavailableError(absl::StrCat("peer failed (exit ", WEXITSTATUS(rc), "): ", command));
  }
  return last;
}

absl::StatusOr<double> RunPeer(const std::string& command) {
  SLUICE_ASSIGN_OR_RETURN(std::string last, LastLineOf(command + " 2>/dev/null"));
  nlohmann::json j = nlohmann::json::parse(last, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.contains("samples_per_s")) {
    return absl::InternalError(absl::StrCat("peer printed no result: ", command));
  }
  return j["samples_per_s"].get<double>();
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string MachineDescription() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, model = "unknown CPU";
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  }
  return absl::StrCat(::sysconf(_SC_NPROCESSORS_ONLN), " cores, ", model);
}

absl::Status EnsureData(const BenchArgs& args) {
  ProgressLine progress(true);
  auto report = [&](int64_t done, int64_t total) {
    progress.Update([&] {
      return absl::StrFormat("making data: %s / %s", WithCommas(done), WithCommas(total));
    });
  };
  absl::Status s;
  if (args.workload == "w1" && !Exists(MnistLayout(args.data + "/mnist").train_images)) {
    std::fprintf(stderr, "generating W1 data (60,000 MNIST images) in %s/mnist\n", args.data.c_str());
    s = WriteSyntheticMnist(args.data + "/mnist", 60000, 1, report);
  }
  if (args.workload == "w2" && !Exists(args.data + "/cifar10/" + CifarShardName(0, 8))) {
    std::fprintf(stderr, "generating W2 data (50,000 CIFAR-10 records in 8 TFRecords) in %s/cifar10\n",
                 args.data.c_str());
    s = WriteSyntheticCifar10(args.data + "/cifar10", 50000, 8, false, 1, report);
  }
  progress.Finish();
  return s;
}

struct Measure {
  std::vector<double> sluice, sluice_1thread, first_batch_ms, torch, tfdata;
};

absl::StatusOr<RunReport> RunSluice(const PipelineDef& base, int threads, double seconds) {
  PipelineDef def = base;
  if (threads > 0) def.mutable_options()->set_threads(threads);
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<exec::Pipeline> pipeline, exec::Pipeline::Create(def));
  RunOptions options;
  options.epochs = 1;
  options.min_seconds = seconds;
  options.progress = false;
  return RunPipeline(*pipeline, options);
}

absl::Status Bench(const BenchArgs& args) {
  SLUICE_RETURN_IF_ERROR(EnsureData(args));
  const bool w1 = args.workload == "w1";
  const PipelineDef def = w1 ? W1Pipeline(args.data + "/mnist") : W2Pipeline(args.data + "/cifar10");
  const std::string peers = PeersDir();
  const int batches = args.peer_batches > 0 ? args.peer_batches : (w1 ? 10 : 20);
  std::optional<std::string> torch_cmd;
  if (!args.no_peers) {
    torch_cmd = absl::StrCat("/usr/bin/python3 ", peers, w1 ? "/w1_torch.py" : "/w2_torch.py",
                             " --data ", args.data, w1 ? "/mnist" : "/cifar10", " --batches ",
                             batches);
  }
  std::optional<std::string> tfdata_cmd;
  std::string torch_note, tfdata_note;
  if (!w1 && !args.no_peers) {
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
                        std::vector<double>& into) {
      if (!cmd) return;
      absl::StatusOr<double> rate = RunPeer(*cmd);
      if (!rate.ok()) {
        note = std::string(rate.status().message());
        std::fprintf(stderr, "warning: %s peer failed, left out: %s\n", name, note.c_str());
        cmd.reset();
        return;
      }
      into.push_back(*rate);
      absl::StrAppend(&line, ", ", name, " ", WithCommas(*rate));
    };
    run_peer(torch_cmd, torch_note, "torch DataLoader", m.torch);
    run_peer(tfdata_cmd, tfdata_note, "tf.data", m.tfdata);
    std::fprintf(stderr, "%s\n", line.c_str());
  }

  const double sluice = Median(m.sluice), one = Median(m.sluice_1thread);
  const double torch = Median(m.torch), tfdata = Median(m.tfdata);
  std::printf("\n%s (%s), median of %d runs on %s\n", args.workload.c_str(), def.name().c_str(),
              args.runs, MachineDescription().c_str());
  std::printf("  %-26s %14s samples/s\n", "sluice", WithCommas(sluice).c_str());
  std::printf("  %-26s %14s samples/s  (2 vs 1 thread: %.2fx)\n", "sluice, 1 thread",
              WithCommas(one).c_str(), one > 0 ? sluice / one : 0);
  if (torch > 0) {
    std::printf("  %-26s %14s samples/s  (sluice: %.1fx)\n", "torch DataLoader (2 workers)",
                WithCommas(torch).c_str(), sluice / torch);
  }
  if (tfdata > 0) {
    std::printf("  %-26s %14s samples/s  (sluice: %.1fx)\n", "tf.data (AUTOTUNE)",
                WithCommas(tfdata).c_str(), sluice / tfdata);
  }
  std::printf("  first batch after %.1f ms (median)\n", Median(m.first_batch_ms));

  if (args.json) {
    nlohmann::json j;
    j["workload"] = args.workload;
    j["runs"] = args.runs;
    j["machine"] = MachineDescription();
    j["sluice_samples_per_s"] = sluice;
    j["sluice_1thread_samples_per_s"] = one;
    j["scaling_2v1"] = one > 0 ? sluice / one : 0;
    j["first_batch_ms"] = Median(m.first_batch_ms);
    j["peer_samples_per_s"] = torch > 0 ? nlohmann::json(torch) : nlohmann::json(nullptr);
    j["ratio"] = torch > 0 ? nlohmann::json(sluice / torch) : nlohmann::json(nullptr);
    if (!torch_note.empty()) j["peer_note"] = torch_note;
    if (!w1) {
      j["tfdata_samples_per_s"] = tfdata > 0 ? nlohmann::json(tfdata) : nlohmann::json(nullptr);
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
  cmd->add_option("workload", args->workload, "w1 (MNIST + blur) or w2 (CIFAR-10 TFRecords + augmentation)")
      ->required()
      ->check(CLI::IsMember({"w1", "w2"}));
  cmd->add_option("--runs", args->runs, "runs per contender (median reported)")->default_val(3)->check(CLI::PositiveNumber);
  cmd->add_flag("--json", args->json, "print one JSON object as the last line");
  cmd->add_option("--data", args->data, "data directory (generated when missing)")->default_val("data");
  cmd->add_option("--peer-batches", args->peer_batches, "timed batches per peer run (default 10 for w1, 20 for w2)");
  cmd->add_option("--seconds", args->seconds, "minimum seconds per sluice run")->default_val(3.0);
  cmd->add_flag("--no-peers", args->no_peers, "measure sluice only");
  cmd->callback([args, result] { *result = Bench(*args); });
}

}  // namespace sluice::cli
