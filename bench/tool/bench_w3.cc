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
#include "nlohmann/json.hpp"
#include "bench_util.h"
#include "sluice/cli/progress.h"
#include "sluice/datagen/synthetic_images.h"
#include "sluice/core/status_macros.h"
#include "sluice/exec/node_stats.h"
#include "sluice/pipeline_builder.h"
#include "sluice/io/image_files.h"
#include "sluice/kernels/image_decoder.h"

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
        if (!kernels::DecodeRegion(bytes, *info, kernels::WholeImage(*info), 1, &region).ok()) failed = true;
        ++done;
      }
    });
  }
  for (std::thread& t : pool) t.join();
  if (failed) return absl::DataLossError(absl::StrCat("an image under ", root, " does not decode"));
  return done / ((exec::NowNs() - start) * 1e-9);
}

}  // namespace

absl::Status BenchW3(const BenchArgs& args) {
  const std::string root = args.data + "/imagenet";
  if (!Exists(root)) {
    ProgressLine progress(true);
    SLUICE_RETURN_IF_ERROR(datagen::WriteSyntheticImageFolder(root, kImages, 10, 1, [&](int64_t done, int64_t total) {
      progress.Update([&] { return absl::StrFormat("imagenet: %d / %d images", done, total); });
    }));
    progress.Finish();
  }
  const int threads = static_cast<int>(std::thread::hardware_concurrency());
  const std::string peers = PeersDir();
  const std::string torch_cmd = absl::StrCat("/usr/bin/python3 ", peers, "/w3_torch.py --data ", root,
                                             " --batches ", args.peer_batches > 0 ? args.peer_batches : 6);
  // A peer in a virtual environment of its own, made on first use by
  // `ensure` (empty command and a note when it cannot be).
  auto venv_peer = [&](const char* ensure, const char* script, std::string* note) -> std::string {
    if (args.no_peers) return "";
    absl::StatusOr<std::string> py = LastLineOf(absl::StrCat(peers, "/", ensure));
    if (!py.ok()) {
      *note = std::string(py.status().message());
      std::fprintf(stderr, "warning: %s peer unavailable: %s\n", script, note->c_str());
      return "";
    }
    return absl::StrCat(*py, " ", peers, "/", script, " --data ", root, " --threads ", threads, " --batches ",
                        args.peer_batches > 0 ? args.peer_batches : 6);
  };
  std::string dali_note, spdl_note;
  const std::string dali_cmd = venv_peer("ensure_dali_venv.sh", "w3_dali.py", &dali_note);
  const std::string spdl_cmd = venv_peer("ensure_spdl_venv.sh", "w3_spdl.py", &spdl_note);
  std::vector<double> sluice, eval, limit, torch, torch_eval, dali, spdl, vs_torch, vs_limit, vs_dali, vs_spdl,
      vs_torch_eval;
  // What each contender hands on per sample ("float32[3,224,224]").
  SLUICE_ASSIGN_OR_RETURN(const std::string sluice_output, OutputOf(W3(root, false), "image"));
  std::string torch_output, dali_output, spdl_output;
  for (int run = 1; run <= args.runs; ++run) {
    SLUICE_ASSIGN_OR_RETURN(RunReport train, RunForSeconds(W3(root, false), args.seconds, /*endless=*/true));
    SLUICE_ASSIGN_OR_RETURN(RunReport ev, RunForSeconds(W3(root, true), args.seconds, /*endless=*/true));
    SLUICE_ASSIGN_OR_RETURN(double decode, DecodeLimit(root, threads, args.seconds));
    sluice.push_back(train.samples_per_s);
    eval.push_back(ev.samples_per_s);
    limit.push_back(decode);
    vs_limit.push_back(train.samples_per_s / decode);
    std::string line = absl::StrFormat("run %d/%d: sluice %s images/s (eval %s), full decode on %d cores %s", run,
                                       args.runs, WithCommas(train.samples_per_s), WithCommas(ev.samples_per_s),
                                       threads, WithCommas(decode));
    if (!args.no_peers) {
      absl::StatusOr<PeerResult> t = RunPeerResult(torch_cmd);
      absl::StatusOr<double> te = RunPeer(torch_cmd + " --mode eval");
      if (t.ok() && te.ok()) {
        torch.push_back(t->samples_per_s);
        torch_output = t->output;
        torch_eval.push_back(*te);
        vs_torch.push_back(train.samples_per_s / t->samples_per_s);
        vs_torch_eval.push_back(ev.samples_per_s / *te);
        absl::StrAppend(&line, "; torchvision ", WithCommas(t->samples_per_s), " (eval ", WithCommas(*te), ")");
      } else {
        std::fprintf(stderr, "warning: torchvision peer failed: %s\n",
                     std::string((t.ok() ? te.status() : t.status()).message()).c_str());
      }
      auto run_venv_peer = [&](const std::string& cmd, const char* name, std::vector<double>* rates,
                               std::vector<double>* ratios, std::string* output, std::string* note) {
        if (cmd.empty()) return;
        absl::StatusOr<PeerResult> r = RunPeerResult(cmd);
        if (!r.ok()) {
          *note = std::string(r.status().message());
          std::fprintf(stderr, "warning: %s peer failed: %s\n", name, note->c_str());
          return;
        }
        rates->push_back(r->samples_per_s);
        *output = r->output;
        ratios->push_back(train.samples_per_s / r->samples_per_s);
        absl::StrAppend(&line, "; ", name, " ", WithCommas(r->samples_per_s));
      };
      run_venv_peer(dali_cmd, "DALI", &dali, &vs_dali, &dali_output, &dali_note);
      run_venv_peer(spdl_cmd, "SPDL", &spdl, &vs_spdl, &spdl_output, &spdl_note);
    }
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  std::printf("\nw3 (decode + random-resized-crop 224 + flip + normalize, batch 256), median of %d runs on %s\n",
              args.runs, MachineDescription().c_str());
  std::printf("  sluice                        %10s images/s\n", WithCommas(Median(sluice)).c_str());
  std::printf("  full-image decode, %d cores    %10s images/s  (sluice: %.0f%%)\n", threads,
              WithCommas(Median(limit)).c_str(), 100 * Median(vs_limit));
  if (!torch.empty()) {
    std::printf("  torchvision DataLoader (%d)   %10s images/s  (sluice: %.1fx)\n", 2, WithCommas(Median(torch)).c_str(),
                Median(vs_torch));
  }
  if (!dali.empty()) {
    std::printf("  DALI, CPU pipeline            %10s images/s  (sluice: %.2fx)\n", WithCommas(Median(dali)).c_str(),
                Median(vs_dali));
  }
  if (!spdl.empty()) {
    std::printf("  SPDL (%d threads)             %10s images/s  (sluice: %.2fx)\n", threads,
                WithCommas(Median(spdl)).c_str(), Median(vs_spdl));
  }
  std::printf("  eval (resize 256, crop 224)   %10s images/s", WithCommas(Median(eval)).c_str());
  if (!torch_eval.empty()) {
    std::printf("  torchvision %s (%.1fx)", WithCommas(Median(torch_eval)).c_str(), Median(vs_torch_eval));
  }
  std::printf("\n");
  bool equal = true;
  std::printf("%s\n", DescribeOutputs(sluice_output, {{"torchvision", torch_output}, {"DALI", dali_output}, {"SPDL", spdl_output}},
                                           &equal)
                          .c_str());
  if (args.json) {
    auto or_null = [](const std::vector<double>& v) { return v.empty() ? nlohmann::json(nullptr) : nlohmann::json(Median(v)); };
    nlohmann::json j;
    j["workload"] = "w3";
    j["runs"] = args.runs;
    j["machine"] = MachineDescription();
    j["sluice_samples_per_s"] = Median(sluice);
    j["peer_samples_per_s"] = or_null(torch);
    j["ratio"] = or_null(vs_torch);
    j["decode_limit_samples_per_s"] = Median(limit);
    j["vs_decode_limit"] = Median(vs_limit);
    j["dali_samples_per_s"] = or_null(dali);
    j["vs_dali"] = or_null(vs_dali);
    if (!dali_note.empty()) j["dali_note"] = dali_note;
    j["spdl_samples_per_s"] = or_null(spdl);
    j["ratio_spdl"] = or_null(vs_spdl);
    j["spdl_output"] = spdl_output.empty() ? nlohmann::json(nullptr) : nlohmann::json(spdl_output);
    if (!spdl_note.empty()) j["spdl_note"] = spdl_note;
    j["eval_samples_per_s"] = Median(eval);
    j["eval_peer_samples_per_s"] = or_null(torch_eval);
    j["eval_ratio"] = or_null(vs_torch_eval);
    j["sluice_output"] = sluice_output;
    j["peer_output"] = torch_output.empty() ? nlohmann::json(nullptr) : nlohmann::json(torch_output);
    j["dali_output"] = dali_output.empty() ? nlohmann::json(nullptr) : nlohmann::json(dali_output);
    j["equal_outputs"] = equal;
    std::printf("%s\n", j.dump().c_str());
  }
  return absl::OkStatus();
}

}  // namespace sluice::bench
