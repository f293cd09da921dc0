// sluice-bench w1|w2|w5a: sluice and its peers (the expert DataLoader a
// skilled user writes: OpenCV or numpy, whole batches per task; the
// torchvision-style DataLoader; for W2 also the articles' tf.data pipeline;
// for the service bench_service.cc) side by side in one run on the same
// machine, medians of several runs, and the ratios.
#include <cstdio>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench_util.h"
#include "nlohmann/json.hpp"
#include "sluice/core/status_macros.h"
#include "workloads.h"

namespace sluice::bench {
namespace {

// What each contender measured, run by run, and what it hands on per
// sample ("float32[3,32,32]").
struct Measure {
  std::vector<double> sluice, sluice_1thread, first_batch_ms;
  std::string sluice_output;
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
    return {W5aPipeline(cifar),
            cifar,
            100,
            "w5a_torch.py",
            "w5a_torch.py --expert",
            "expert: in memory, torch or numpy",
            false,
            false};
  }
  return {W2Pipeline(cifar), cifar, 20, "w2_torch.py", "w2_opencv.py", "expert: OpenCV (2 workers)", true, true};
}

// A peer's command (none when it cannot run here: `note` says why), its
// figures run by run and what it hands on per sample. A peer that fails is
// reported and left out; sluice's figures stand.
struct Peer {
  Peer(std::string name, std::string label) : name(std::move(name)), label(std::move(label)) {}

  std::string name, label;
  std::optional<std::string> command;
  std::string note;
  std::vector<double> rates;
  std::string output;

  void Run(std::string* line) {
    if (!command) return;
    absl::StatusOr<PeerResult> result = RunPeerResult(*command);
    if (!result.ok()) {
      note = std::string(result.status().message());
      std::fprintf(stderr, "warning: %s peer failed, left out: %s\n", name.c_str(), note.c_str());
      command.reset();
      return;
    }
    rates.push_back(result->samples_per_s);
    output = result->output;
    absl::StrAppend(line, ", ", name, " ", WithCommas(result->samples_per_s));
  }
  // `interpreter` runs `script_and_args` from bench/peers, or says why not.
  void Prepare(const absl::StatusOr<std::string>& interpreter, const std::string& script_and_args) {
    if (interpreter.ok()) {
      command = absl::StrCat(*interpreter, " ", PeersDir(), "/", script_and_args);
    } else {
      note = std::string(interpreter.status().message());
      std::fprintf(stderr, "warning: %s peer unavailable: %s\n", name.c_str(), note.c_str());
    }
  }
};

// The expert DataLoader, the torchvision DataLoader and (W2) tf.data.
std::vector<Peer> PeersOf(const Workload& w, const BenchArgs& args) {
  std::vector<Peer> peers = {{"expert DataLoader", w.expert_label},
                             {"torch DataLoader", "torchvision DataLoader (2 w.)"}};
  if (w.tfdata) peers.push_back({"tf.data", "tf.data (AUTOTUNE)"});
  if (args.no_peers) return peers;
  const int batches = args.peer_batches > 0 ? args.peer_batches : w.batches;
  const std::string data_arg = absl::StrCat(" --data ", w.data, " --batches ", batches);
  // The OpenCV experts use Debian's python3-opencv, installed on first use.
  peers[0].Prepare(
      w.expert_uses_opencv ? LastLineOf(PeersDir() + "/ensure_opencv.sh") : std::string("/usr/bin/python3"),
      w.expert_script + data_arg);
  peers[1].Prepare(std::string("/usr/bin/python3"), w.torch_script + data_arg);
  if (w.tfdata) {
    std::fprintf(stderr, "preparing the tf.data peer's virtual environment (first use installs tensorflow-cpu)\n");
    peers[2].Prepare(LastLineOf(PeersDir() + "/ensure_peer_venv.sh"), "w2_tfdata.py" + data_arg);
  }
  return peers;
}

absl::Status RunAll(const Workload& w, const BenchArgs& args, Measure* m, std::vector<Peer>* peers) {
  for (int run = 1; run <= args.runs; ++run) {
    SLUICE_ASSIGN_OR_RETURN(RunReport two, RunSluice(w.def, 0, args.seconds));
    SLUICE_ASSIGN_OR_RETURN(RunReport one, RunSluice(w.def, 1, args.seconds));
    m->sluice.push_back(two.samples_per_s);
    m->sluice_1thread.push_back(one.samples_per_s);
    m->first_batch_ms.push_back(two.first_batch_ms);
    std::string line = absl::StrFormat("run %d/%d: sluice %s samples/s (1 thread: %s)", run, args.runs,
                                       WithCommas(two.samples_per_s), WithCommas(one.samples_per_s));
    for (Peer& peer : *peers) peer.Run(&line);
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  return absl::OkStatus();
}

// The table of medians and ratios; whether every peer that said what it
// hands on matched sluice's output.
bool PrintSummary(const BenchArgs& args, const Workload& w, const Measure& m, const std::vector<Peer>& peers) {
  const double sluice = Median(m.sluice), one = Median(m.sluice_1thread);
  std::printf("\n%s (%s), median of %d runs on %s\n", args.workload.c_str(), w.def.name().c_str(), args.runs,
              MachineDescription().c_str());
  std::printf("  %-26s %14s samples/s\n", "sluice", WithCommas(sluice).c_str());
  std::printf("  %-26s %14s samples/s  (2 vs 1 thread: %.2fx)\n", "sluice, 1 thread", WithCommas(one).c_str(),
              one > 0 ? sluice / one : 0);
  std::vector<std::pair<std::string, std::string>> outputs;
  for (const Peer& peer : peers) {
    const double rate = Median(peer.rates);
    if (rate > 0) {
      std::printf("  %-26s %14s samples/s  (sluice: %.1fx)\n", peer.label.c_str(), WithCommas(rate).c_str(),
                  sluice / rate);
    }
    outputs.emplace_back(peer.name, peer.output);
  }
  std::printf("  first batch after %.1f ms (median)\n", Median(m.first_batch_ms));
  bool equal = true;
  std::printf("%s\n", DescribeOutputs(m.sluice_output, outputs, &equal).c_str());
  return equal;
}

nlohmann::json OrNull(double v) { return v > 0 ? nlohmann::json(v) : nlohmann::json(nullptr); }
nlohmann::json OrNull(const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); }

// One peer's median, output and ratio under `prefix` ("peer", "expert",
// "tfdata"), and why it is missing when it is.
void AddPeerJson(const std::string& prefix, const std::string& ratio_key, const Peer& peer, double sluice,
                 nlohmann::json* j) {
  const double rate = Median(peer.rates);
  (*j)[prefix + "_samples_per_s"] = OrNull(rate);
  (*j)[prefix + "_output"] = OrNull(peer.output);
  (*j)[ratio_key] = OrNull(rate > 0 ? sluice / rate : 0);
  if (!peer.note.empty()) (*j)[prefix + "_note"] = peer.note;
}

void PrintJson(const BenchArgs& args, const Measure& m, const std::vector<Peer>& peers, bool equal) {
  const double sluice = Median(m.sluice), one = Median(m.sluice_1thread);
  nlohmann::json j;
  j["workload"] = args.workload;
  j["runs"] = args.runs;
  j["machine"] = MachineDescription();
  j["sluice_samples_per_s"] = sluice;
  j["sluice_1thread_samples_per_s"] = one;
  j["scaling_2v1"] = one > 0 ? sluice / one : 0;
  j["first_batch_ms"] = Median(m.first_batch_ms);
  j["sluice_output"] = m.sluice_output;
  j["equal_outputs"] = equal;
  AddPeerJson("expert", "ratio_expert", peers[0], sluice, &j);
  AddPeerJson("peer", "ratio", peers[1], sluice, &j);
  if (peers.size() > 2) AddPeerJson("tfdata", "ratio_tfdata", peers[2], sluice, &j);
  std::printf("%s\n", j.dump().c_str());
}

}  // namespace

absl::Status BenchInProcess(const BenchArgs& args) {
  const bool w1 = args.workload == "w1";
  SLUICE_RETURN_IF_ERROR(EnsureData(args.data, w1, !w1));
  const Workload w = WorkloadOf(args);
  std::vector<Peer> peers = PeersOf(w, args);
  Measure m;
  SLUICE_ASSIGN_OR_RETURN(m.sluice_output, OutputOf(w.def, "image"));
  SLUICE_RETURN_IF_ERROR(RunAll(w, args, &m, &peers));
  const bool equal = PrintSummary(args, w, m, peers);
  if (args.json) PrintJson(args, m, peers, equal);
  return absl::OkStatus();
}

}  // namespace sluice::bench
