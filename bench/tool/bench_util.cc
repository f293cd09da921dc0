#include "bench_util.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "sluice/cli/progress.h"
#include "sluice/core/status_macros.h"
#include "sluice/datagen/synthetic_data.h"
#include "sluice/graph/compiled_pipeline.h"

// Where the peers' scripts are: this checkout (set by the build).
#ifndef SLUICE_SOURCE_DIR
#define SLUICE_SOURCE_DIR "."
#endif

namespace sluice::bench {

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

absl::StatusOr<std::string> SelfPath() {
  char self[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return absl::InternalError("cannot read /proc/self/exe");
  return std::string(self, n);
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

absl::StatusOr<PeerResult> RunPeerResult(const std::string& command) {
  SLUICE_ASSIGN_OR_RETURN(std::string last, LastLineOf(command + " 2>/dev/null"));
  nlohmann::json j = nlohmann::json::parse(last, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.contains("samples_per_s")) {
    return absl::InternalError(absl::StrCat("peer printed no result: ", command));
  }
  PeerResult r;
  r.samples_per_s = j["samples_per_s"].get<double>();
  if (j.contains("output") && j["output"].is_string()) r.output = j["output"].get<std::string>();
  return r;
}

std::string DescribeOutputs(const std::string& sluice, const std::vector<std::pair<std::string, std::string>>& peers,
                            bool* equal) {
  *equal = true;
  std::string out = absl::StrCat("  outputs per sample: sluice ", sluice);
  for (const auto& [name, output] : peers) {
    if (output.empty()) continue;
    *equal = *equal && output == sluice;
    absl::StrAppend(&out, "; ", name, " ", output, output == sluice ? "" : " (DIFFERENT)");
  }
  return out;
}

absl::StatusOr<double> RunPeer(const std::string& command) {
  SLUICE_ASSIGN_OR_RETURN(PeerResult r, RunPeerResult(command));
  return r.samples_per_s;
}

nlohmann::json PythonPeerJson(const std::string& script, const std::string& args) {
  const std::string command = absl::StrCat("python3 ", PeersDir(), "/", script, " ", args);
  absl::StatusOr<std::string> last = LastLineOf(command);
  nlohmann::json j =
      last.ok() ? nlohmann::json::parse(*last, nullptr, /*allow_exceptions=*/false) : nlohmann::json(nullptr);
  if (j.is_discarded() || !j.is_object()) {
    std::fprintf(stderr, "bench: %s gave no result; its part is left out\n", script.c_str());
    return nullptr;
  }
  return j;
}

absl::StatusOr<std::string> OutputOf(const PipelineDef& def, const std::string& column) {
  SLUICE_ASSIGN_OR_RETURN(const graph::CompiledPipeline compiled, graph::Compile(def));
  const Schema schema = compiled.output_schema();
  const std::optional<int> i = schema.Find(column);
  if (!i) return absl::NotFoundError(absl::StrCat("the pipeline outputs no column '", column, "'"));
  const ColumnSpec& spec = schema.column(*i);
  return absl::StrCat(DTypeName(spec.dtype), spec.shape.ToString());
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

absl::Status EnsureData(const std::string& data, bool w1, bool w2) {
  ProgressLine progress(true);
  auto report = [&](int64_t done, int64_t total) {
    progress.Update([&] { return absl::StrFormat("making data: %s / %s", WithCommas(done), WithCommas(total)); });
  };
  absl::Status s;
  if (w1 && !Exists(datagen::MnistLayout(data + "/mnist").train_images)) {
    std::fprintf(stderr, "generating W1 data (60,000 MNIST images) in %s/mnist\n", data.c_str());
    s = datagen::WriteSyntheticMnist(data + "/mnist", 60000, 1, report);
  }
  if (w2 && !Exists(data + "/cifar10/" + datagen::TfRecordShardName(0, 8))) {
    std::fprintf(stderr, "generating W2 data (50,000 CIFAR-10 records in 8 TFRecords) in %s/cifar10\n", data.c_str());
    s = datagen::WriteSyntheticCifar10(data + "/cifar10", 50000, 8, false, 1, report);
  }
  progress.Finish();
  return s;
}

absl::StatusOr<RunReport> RunForSeconds(const PipelineDef& def, double seconds, bool endless) {
  SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<placement::PlacedPipeline> pipeline, placement::PlacedPipeline::Create(def));
  RunOptions options;
  options.epochs = 1;
  options.min_seconds = seconds;
  options.endless = endless;
  options.progress = false;
  return RunPipeline(*pipeline, options);
}

}  // namespace sluice::bench
