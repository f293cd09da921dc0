// sluice-bench w3: ImageNet-style JPEGs, decode + random-resized-crop 224 +
// flip + normalize, batch 256, against the torchvision peer (ImageFolder +
// transforms in a DataLoader), NVIDIA DALI's CPU pipeline and SPDL (Meta's
// thread-based loader, decoding with FFmpeg), beside the
// machine's limit: plain full-image libjpeg-turbo decoding on every core.
// Also the evaluation pipeline (resize 256, centre crop 224) against the
// peer's. Runs interleave; medians.
#include <atomic>
#include <cstdio>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench_util.h"
#include "nlohmann/json.hpp"
#include "sluice/cli/progress.h"
#include "sluice/core/status_macros.h"
#include "sluice/datagen/synthetic_images.h"
#include "sluice/exec/node_stats.h"
#include "sluice/io/image_files.h"
#include "sluice/kernels/image_decoder.h"
#include "sluice/pipeline_builder.h"

namespace sluice::bench {
namespace {

constexpr int64_t kImages = 2000;

PipelineDef W3(const std::string& root, bool eval) {
  // Epochs run on without draining the pipeline, as the peers' readers do
  // (the synthetic set is 8 batches an epoch; ImageNet's is 5,000).
  return PipelineBuilder::ImageFolder(root)
      .ShuffleSplits()
      .Repeat(0)
      .Map(eval ? std::vector<OpSpec>{Op("decode_resize_center_crop", {{"resize", 256}, {"crop", {224}}}),
                                      Op("crop_mirror_normalize", {{"mirror", 0.0}})}
                : std::vector<OpSpec>{Op("decode_random_resized_crop", {{"size", {224}}}),
                                      Op("crop_mirror_normalize", {{"mirror", 0.5}})})
      .Batch(256, /*drop_remainder=*/true)
      .Prefetch()
      .Name(eval ? "w3_eval" : "w3")
      .Build();
}

// Full-image decoding of every file, `threads` at once, for `seconds`:
// what the machine's cores can decode at all.
absl::StatusOr<double> DecodeLimit(const std::string& root, int threads, double seconds) {
  SLUICE_ASSIGN_OR_RETURN(const std::vector<std::string> images, io::ReadImageFolder(root));
  std::atomic<int64_t> next{0}, done{0};
  std::atomic<bool> failed{false};
  const int64_t stop_at = exec::NowNs() + static_cast<int64_t>(seconds * 1e9);
  std::vector<std::thread> pool;
  const int64_t start = exec::NowNs();
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      kernels::DecodedRegion region;
      while (exec::NowNs() < stop_at) {
        const std::string& bytes = images[static_cast<size_t>(next++) % images.size()];
        absl::StatusOr<kernels::ImageInfo> info = kernels::ReadImageInfo(bytes);
        if (!info.ok()) {
          failed = true;
          break;
        }
        const kernels::Window whole = kernels::WholeImage(*info);
        if (!kernels::DecodeRegion(bytes, *info, whole, 1, info->width, info->height, &region).ok()) failed = true;
        ++done;
      }
    });
  }
  for (std::thread& t : pool) t.join();
  if (failed) return absl::DataLossError(absl::StrCat("an image under ", root, " does not decode"));
  return done / ((exec::NowNs() - start) * 1e-9);
}

absl::Status EnsureImages(const std::string& root) {
  if (Exists(root)) return absl::OkStatus();
  ProgressLine progress(true);
  SLUICE_RETURN_IF_ERROR(datagen::WriteSyntheticImageFolder(root, kImages, 10, 1, [&](int64_t done, int64_t total) {
    progress.Update([&] { return absl::StrFormat("imagenet: %d / %d images", done, total); });
  }));
  progress.Finish();
  return absl::OkStatus();
}

nlohmann::json OrNull(const std::vector<double>& v) {
  return v.empty() ? nlohmann::json(nullptr) : nlohmann::json(Median(v));
}
nlohmann::json OrNull(const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); }

// A peer in a virtual environment of its own (DALI, SPDL): its command
// (empty, with a note, when it cannot run here), figures and output.
struct VenvPeer {
  std::string name, command, note, output;
  std::vector<double> rates, vs_sluice;

  void Run(double sluice, std::string* line) {
    if (command.empty()) return;
    absl::StatusOr<PeerResult> r = RunPeerResult(command);
    if (!r.ok()) {
      note = std::string(r.status().message());
      std::fprintf(stderr, "warning: %s peer failed: %s\n", name.c_str(), note.c_str());
      return;
    }
    rates.push_back(r->samples_per_s);
    output = r->output;
    vs_sluice.push_back(sluice / r->samples_per_s);
    absl::StrAppend(line, "; ", name, " ", WithCommas(r->samples_per_s));
  }
};

class W3Bench {
 public:
  explicit W3Bench(const BenchArgs& args)
      : args_(args), root_(args.data + "/imagenet"), threads_(static_cast<int>(std::thread::hardware_concurrency())) {}

  absl::Status Start() {
    SLUICE_RETURN_IF_ERROR(EnsureImages(root_));
    SLUICE_ASSIGN_OR_RETURN(sluice_output_, OutputOf(W3(root_, false), "image"));
    torch_cmd_ = absl::StrCat("/usr/bin/python3 ", PeersDir(), "/w3_torch.py --data ", root_, " --batches ", Batches());
    dali_ = MakeVenvPeer("DALI", "ensure_dali_venv.sh", "w3_dali.py");
    spdl_ = MakeVenvPeer("SPDL", "ensure_spdl_venv.sh", "w3_spdl.py");
    return absl::OkStatus();
  }

  absl::Status Run(int run) {
    SLUICE_ASSIGN_OR_RETURN(RunReport train, RunForSeconds(W3(root_, false), args_.seconds, /*endless=*/true));
    SLUICE_ASSIGN_OR_RETURN(RunReport ev, RunForSeconds(W3(root_, true), args_.seconds, /*endless=*/true));
    SLUICE_ASSIGN_OR_RETURN(double decode, DecodeLimit(root_, threads_, args_.seconds));
    sluice_.push_back(train.samples_per_s);
    eval_.push_back(ev.samples_per_s);
    limit_.push_back(decode);
    vs_limit_.push_back(train.samples_per_s / decode);
    std::string line =
        absl::StrFormat("run %d/%d: sluice %s images/s (eval %s), full decode on %d cores %s", run, args_.runs,
                        WithCommas(train.samples_per_s), WithCommas(ev.samples_per_s), threads_, WithCommas(decode));
    if (!args_.no_peers) {
      RunTorch(train.samples_per_s, ev.samples_per_s, &line);
      dali_.Run(train.samples_per_s, &line);
      spdl_.Run(train.samples_per_s, &line);
    }
    std::fprintf(stderr, "%s\n", line.c_str());
    return absl::OkStatus();
  }

  // The table of medians and ratios; whether the peers' outputs matched.
  bool PrintSummary() const;
  void PrintJson(bool equal) const;

 private:
  int Batches() const { return args_.peer_batches > 0 ? args_.peer_batches : 6; }

  // `ensure` makes the peer's virtual environment on first use.
  VenvPeer MakeVenvPeer(const char* name, const char* ensure, const char* script) const {
    VenvPeer peer;
    peer.name = name;
    if (args_.no_peers) return peer;
    absl::StatusOr<std::string> py = LastLineOf(absl::StrCat(PeersDir(), "/", ensure));
    if (!py.ok()) {
      peer.note = std::string(py.status().message());
      std::fprintf(stderr, "warning: %s peer unavailable: %s\n", script, peer.note.c_str());
      return peer;
    }
    peer.command = absl::StrCat(*py, " ", PeersDir(), "/", script, " --data ", root_, " --threads ", threads_,
                                " --batches ", Batches());
    return peer;
  }

  void RunTorch(double train, double eval, std::string* line) {
    absl::StatusOr<PeerResult> t = RunPeerResult(torch_cmd_);
    absl::StatusOr<double> te = RunPeer(torch_cmd_ + " --mode eval");
    if (!t.ok() || !te.ok()) {
      std::fprintf(stderr, "warning: torchvision peer failed: %s\n",
                   std::string((t.ok() ? te.status() : t.status()).message()).c_str());
      return;
    }
    torch_.push_back(t->samples_per_s);
    torch_output_ = t->output;
    torch_eval_.push_back(*te);
    vs_torch_.push_back(train / t->samples_per_s);
    vs_torch_eval_.push_back(eval / *te);
    absl::StrAppend(line, "; torchvision ", WithCommas(t->samples_per_s), " (eval ", WithCommas(*te), ")");
  }

  const BenchArgs& args_;
  const std::string root_;
  const int threads_;
  std::string torch_cmd_;
  VenvPeer dali_, spdl_;
  std::vector<double> sluice_, eval_, limit_, vs_limit_, torch_, torch_eval_, vs_torch_, vs_torch_eval_;
  // What each contender hands on per sample ("float32[3,224,224]").
  std::string sluice_output_, torch_output_;
};

bool W3Bench::PrintSummary() const {
  std::printf("\nw3 (decode + random-resized-crop 224 + flip + normalize, batch 256), median of %d runs on %s\n",
              args_.runs, MachineDescription().c_str());
  std::printf("  sluice                        %10s images/s\n", WithCommas(Median(sluice_)).c_str());
  std::printf("  full-image decode, %d cores    %10s images/s  (sluice: %.0f%%)\n", threads_,
              WithCommas(Median(limit_)).c_str(), 100 * Median(vs_limit_));
  if (!torch_.empty()) {
    std::printf("  torchvision DataLoader (%d)   %10s images/s  (sluice: %.1fx)\n", 2,
                WithCommas(Median(torch_)).c_str(), Median(vs_torch_));
  }
  if (!dali_.rates.empty()) {
    std::printf("  DALI, CPU pipeline            %10s images/s  (sluice: %.2fx)\n",
                WithCommas(Median(dali_.rates)).c_str(), Median(dali_.vs_sluice));
  }
  if (!spdl_.rates.empty()) {
    std::printf("  SPDL (%d threads)             %10s images/s  (sluice: %.2fx)\n", threads_,
                WithCommas(Median(spdl_.rates)).c_str(), Median(spdl_.vs_sluice));
  }
  std::printf("  eval (resize 256, crop 224)   %10s images/s", WithCommas(Median(eval_)).c_str());
  if (!torch_eval_.empty()) {
    std::printf("  torchvision %s (%.1fx)", WithCommas(Median(torch_eval_)).c_str(), Median(vs_torch_eval_));
  }
  std::printf("\n");
  bool equal = true;
  std::printf("%s\n",
              DescribeOutputs(sluice_output_,
                              {{"torchvision", torch_output_}, {"DALI", dali_.output}, {"SPDL", spdl_.output}}, &equal)
                  .c_str());
  return equal;
}

void W3Bench::PrintJson(bool equal) const {
  nlohmann::json j;
  j["workload"] = "w3";
  j["runs"] = args_.runs;
  j["machine"] = MachineDescription();
  j["sluice_samples_per_s"] = Median(sluice_);
  j["peer_samples_per_s"] = OrNull(torch_);
  j["ratio"] = OrNull(vs_torch_);
  j["decode_limit_samples_per_s"] = Median(limit_);
  j["vs_decode_limit"] = Median(vs_limit_);
  j["dali_samples_per_s"] = OrNull(dali_.rates);
  j["vs_dali"] = OrNull(dali_.vs_sluice);
  if (!dali_.note.empty()) j["dali_note"] = dali_.note;
  j["spdl_samples_per_s"] = OrNull(spdl_.rates);
  j["ratio_spdl"] = OrNull(spdl_.vs_sluice);
  j["spdl_output"] = OrNull(spdl_.output);
  if (!spdl_.note.empty()) j["spdl_note"] = spdl_.note;
  j["eval_samples_per_s"] = Median(eval_);
  j["eval_peer_samples_per_s"] = OrNull(torch_eval_);
  j["eval_ratio"] = OrNull(vs_torch_eval_);
  j["sluice_output"] = sluice_output_;
  j["peer_output"] = OrNull(torch_output_);
  j["dali_output"] = OrNull(dali_.output);
  j["equal_outputs"] = equal;
  std::printf("%s\n", j.dump().c_str());
}

}  // namespace

absl::Status BenchW3(const BenchArgs& args) {
  W3Bench bench(args);
  SLUICE_RETURN_IF_ERROR(bench.Start());
  for (int run = 1; run <= args.runs; ++run) SLUICE_RETURN_IF_ERROR(bench.Run(run));
  const bool equal = bench.PrintSummary();
  if (args.json) bench.PrintJson(equal);
  return absl::OkStatus();
}

}  // namespace sluice::bench
