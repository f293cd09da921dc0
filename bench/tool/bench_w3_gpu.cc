// sluice-bench w3 --device cuda: W3 with the JPEGs decoded on the GPU
// (nvJPEG in a map on device "cuda", the bytes batched on the host), into
// a torch consumer on the GPU, against torchvision's own GPU path (batched
// decode_jpeg(device="cuda") and the v2 transforms on the GPU) and sluice's
// W3 all on the CPU of the same machine; the host CPU each spends per
// 1,000 images/s, and where sluice decoded the images (hardware engines,
// CUDA, CPU). When the GPU has hardware engines, sluice is measured again
// with them off. The runs are bench/peers/gpu_end_to_end.py's.
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench_util.h"
#include "sluice/cli/progress.h"
#include "sluice/core/status_macros.h"
#include "sluice/datagen/synthetic_images.h"
#include "sluice/ops/op_registry.h"

namespace sluice::bench {
namespace {

// "1,234 images/s, 0.80 cores per 1,000 images/s" of a contender's result.
std::string Rate(const nlohmann::json& c) {
  const double rate = c["samples_per_s"].get<double>();
  const double cores = c["cpu_s_per_1m_samples"].get<double>() / 1e3;
  return absl::StrFormat("%10s images/s  %5.2f host cores per 1,000 images/s", WithCommas(rate), cores);
}

}  // namespace

absl::Status BenchW3Gpu(const BenchArgs& args) {
  const ops::OpRegistry& registry = ops::OpRegistry::Global();
  ops::DeviceRuntime* runtime = registry.runtime(ops::Backend::kCuda);
  if (runtime == nullptr) {
    return absl::FailedPreconditionError(
        "bench w3 --device cuda: this sluice was built without the cuda backend (configure with "
        "-DSLUICE_WITH_CUDA=ON)");
  }
  if (!registry.Runs("decode_random_resized_crop", ops::Backend::kCuda)) {
    return absl::FailedPreconditionError(
        "bench w3 --device cuda: this sluice was built without nvJPEG, so the decode ops have no cuda kernel "
        "(install the nvidia-nvjpeg wheel into .venv, or set SLUICE_NVJPEG_ROOT, and reconfigure; docs/gpu.md)");
  }
  SLUICE_RETURN_IF_ERROR(runtime->CheckAvailable());
  const std::string root = args.data + "/imagenet";
  if (!Exists(root)) {
    SLUICE_RETURN_IF_ERROR(datagen::WriteSyntheticImageFolder(root, 2000, 10, 1, [](int64_t, int64_t) {}));
  }
  const std::string common = absl::StrCat("--data ", args.data, " --runs ", args.runs, " --workloads w3_nvjpeg");
  nlohmann::json all = PythonPeerJson(
      "gpu_end_to_end.py", absl::StrCat(common, args.no_peers ? " --contenders sluice_gpu"
                                                              : " --contenders sluice_gpu,torch_gpu,sluice_cpu"));
  if (all.is_null() || !all.contains("w3_nvjpeg")) {
    return absl::InternalError("bench w3 --device cuda: bench/peers/gpu_end_to_end.py gave no result (see above)");
  }
  nlohmann::json& w = all["w3_nvjpeg"];
  const nlohmann::json& stats = w["device_decode_stats"];
  if (stats["hardware"].get<int64_t>() > 0) {
    // The same script in a process whose decoder keeps off the engines.
    setenv("SLUICE_NVJPEG_HARDWARE", "0", 1);
    nlohmann::json cuda_only = PythonPeerJson("gpu_end_to_end.py", absl::StrCat("--contenders sluice_gpu ", common));
    unsetenv("SLUICE_NVJPEG_HARDWARE");
    if (!cuda_only.is_null()) w["sluice_gpu_without_hardware"] = cuda_only["w3_nvjpeg"]["sluice_gpu"];
  }
  const int device = runtime->CurrentDevice();
  all["device"] = runtime->Describe(device);
  all["machine"] = MachineDescription();
  std::printf(
      "\nw3 decoded on the GPU (decode + random-resized-crop 224 + flip + normalize, batch 256, into torch "
      "on CUDA), median of %d runs\ndevice: %s; host: %s\n",
      args.runs, all["device"].get<std::string>().c_str(), all["machine"].get<std::string>().c_str());
  std::printf("  sluice, nvJPEG (%s)\n    %s\n", stats["decoder"].get<std::string>().c_str(),
              Rate(w["sluice_gpu"]).c_str());
  std::printf("    decoded: %lld on the hardware engines, %lld by CUDA, %lld on the CPU\n",
              static_cast<long long>(stats["hardware"].get<int64_t>()),
              static_cast<long long>(stats["cuda"].get<int64_t>()),
              static_cast<long long>(stats["cpu"].get<int64_t>()));
  if (w.contains("sluice_gpu_without_hardware")) {
    std::printf("  sluice, nvJPEG without the hardware engines\n    %s\n",
                Rate(w["sluice_gpu_without_hardware"]).c_str());
  }
  for (const auto& [key, name] :
       {std::pair<const char*, const char*>{"torch_gpu", "torchvision decode_jpeg(cuda) + v2"},
        {"sluice_cpu", "sluice, all on the CPU"}}) {
    if (!w.contains(key)) continue;
    std::printf("  %s\n    %s  (GPU sluice: %.2fx)\n", name, Rate(w[key]).c_str(),
                w["sluice_gpu"]["samples_per_s"].get<double>() / w[key]["samples_per_s"].get<double>());
  }
  if (args.json) std::printf("%s\n", all.dump().c_str());
  return absl::OkStatus();
}

}  // namespace sluice::bench
