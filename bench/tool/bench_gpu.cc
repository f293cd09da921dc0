// sluice-bench gpu: the cuda backend against the GPU's own limits and
// against torchvision.transforms.v2 on CUDA tensors, in one run:
//   - the ceilings: a device-to-device copy (bytes read + written) and a
//     host-to-device copy from page-locked memory;
//   - each tail op's cuda kernel on a batch already on the device (device
//     time from events, medians): GB/s for the memory-bound ones, as a
//     share of the copy ceiling; samples/s for blur, warp, dilation and
//     resampling;
//   - sluice's transfer: a cuda map fed host batches (page-locked, and
//     pageable through its staging buffers), input GB/s against the
//     page-locked ceiling;
//   - the peers (bench/peers/torchvision_gpu.py) and the end-to-end runs
//     into a torch consumer (bench/peers/gpu_end_to_end.py), when a Python
//     with torch, CUDA and sluice is there.
#include <cstdio>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench_util.h"
#include "nlohmann/json.hpp"
#include "sluice/core/status_macros.h"
#include "sluice/datagen/synthetic_images.h"
#include "sluice/exec/map_plan.h"
#include "sluice/exec/pipeline.h"
#include "sluice/graph/compiled_pipeline.h"
#include "sluice/ops/device_runtime.h"
#include "sluice/ops/op_registry.h"
#include "sluice/pipeline_builder.h"

namespace sluice::bench {
namespace {

constexpr int kReps = 10;

// One tail op (or fused chain) on one batch shape.
struct KernelCase {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;  // per sample
  int64_t rows;
  std::vector<OpSpec> ops;
  bool memory_bound;  // reported in GB/s against the copy ceiling
};

// The memory-bound ops run on 2048 images of W3's shape (308 MB in): large
// enough that the per-batch host work (allocation, events, random draws)
// hides behind the kernel, which is what the copy ceiling compares.
constexpr int64_t kLargeBatch = 2048;

std::vector<KernelCase> Cases() {
  const std::vector<int64_t> w1{28, 28, 1}, w2{32, 32, 3}, w3{224, 224, 3}, photo{375, 500, 3};
  return {
      {"cast uint8->float32", DType::kUInt8, w3, kLargeBatch, {Op("cast", {{"dtype", "float32"}})}, true},
      {"rescale", DType::kUInt8, w3, kLargeBatch, {Op("rescale", {{"scale", 1 / 255.0}})}, true},
      {"normalize",
       DType::kUInt8,
       w3,
       kLargeBatch,
       {Op("normalize",
           {{"mean", {0.485, 0.456, 0.406}}, {"std", {0.229, 0.224, 0.225}}, {"scale", 1 / 255.0}, {"layout", "HWC"}})},
       true},
      {"crop_mirror_normalize CHW float32",
       DType::kUInt8,
       w3,
       kLargeBatch,
       {Op("crop_mirror_normalize", {{"mirror", 0.5}})},
       true},
      {"random_flip uint8", DType::kUInt8, w3, kLargeBatch, {Op("random_flip", {{"mode", "horizontal"}})}, true},
      {"gaussian_blur 11x11 (W1 batch)",
       DType::kFloat32,
       w1,
       8192,
       {Op("gaussian_blur", {{"ksize", 11}, {"sigma", {0.1, 2.0}}})},
       false},
      {"grey_dilation 3x3 + gaussian_blur 11x11 (W2 batch)",
       DType::kUInt8,
       w2,
       1024,
       {Op("grey_dilation", {{"size", 3}}), Op("gaussian_blur", {{"ksize", 11}, {"sigma", 0.8}})},
       false},
      {"fused warp: flip + rotation + zoom (W2 batch)",
       DType::kFloat32,
       w2,
       1024,
       {Op("random_flip", {{"mode", "horizontal"}}),
        Op("random_rotation", {{"degrees", 36.0}, {"fill_mode", "reflect"}}),
        Op("random_zoom", {{"scale", {0.9, 1.1}}, {"fill_mode", "reflect"}})},
       false},
      {"random_resized_crop 224 (500x375 photos)",
       DType::kUInt8,
       photo,
       256,
       {Op("random_resized_crop", {{"size", {224}}})},
       false},
  };
}

// A batch of `rows` random samples in `kind` memory.
absl::StatusOr<Batch> RandomBatch(ops::DeviceRuntime* runtime, int device, DType dtype,
                                  const std::vector<int64_t>& shape, int64_t rows, MemoryKind kind) {
  Shape sample(shape);
  const Shape batch_shape = sample.WithLeading(rows);
  const size_t bytes = static_cast<size_t>(batch_shape.num_elements()) * DTypeSize(dtype);
  std::shared_ptr<Buffer> host =
      kind == MemoryKind::kHost ? BufferPool::Default()->Allocate(bytes) : runtime->StagingPool()->Allocate(bytes);
  std::mt19937 gen(7);
  if (dtype == DType::kFloat32) {
    float* v = reinterpret_cast<float*>(host->data());
    for (size_t i = 0; i < bytes / 4; ++i) v[i] = static_cast<float>(gen() % 256) / 255.0f;
  } else {
    for (size_t i = 0; i < bytes; ++i) host->data()[i] = static_cast<uint8_t>(gen());
  }
  Batch b;
  b.rows = rows;
  if (kind == MemoryKind::kDevice) {
    SLUICE_ASSIGN_OR_RETURN(void* stream, runtime->ThreadStream(device));
    SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> d, runtime->Allocate(bytes, device, stream));
    SLUICE_RETURN_IF_ERROR(runtime->CopyToDevice(d->data(), host->data(), bytes, stream));
    SLUICE_RETURN_IF_ERROR(runtime->MarkReady({d}, stream, {host}));
    SLUICE_RETURN_IF_ERROR(runtime->Synchronize(*d));
    host = std::move(d);
  }
  b.columns.emplace_back();
  b.columns.back().values = Tensor(dtype, batch_shape, std::move(host));
  return b;
}

// The cuda map of `c`, compiled and with its kernels.
struct CompiledMap {
  graph::CompiledPipeline compiled;
  std::unique_ptr<exec::MapPlan> plan;
};

absl::StatusOr<CompiledMap> CompileMap(const KernelCase& c, ops::DeviceRuntime* runtime) {
  const std::vector<uint8_t> one(Shape(c.shape).num_elements() * DTypeSize(c.dtype), 0);
  NamedArray column{"image", c.dtype, c.shape, std::string(one.begin(), one.end())};
  const PipelineDef def = PipelineBuilder::Arrays({column}).Batch(c.rows).Map(c.ops, 0, "cuda").Build();
  CompiledMap m;
  SLUICE_ASSIGN_OR_RETURN(m.compiled, graph::Compile(def));
  SLUICE_RETURN_IF_ERROR(exec::PrepareKernels(&m.compiled));
  m.plan = exec::MapPlan::Make(m.compiled.nodes.back(), runtime);
  return m;
}

// Median milliseconds per batch of the map on `in` (device time).
absl::StatusOr<double> TimeMap(const exec::MapPlan& plan, const Batch& in, ops::DeviceRuntime* runtime, int device,
                               int runs) {
  exec::MapPlan::RunArgs args;
  // The last few outputs stay alive, as a consumer's batches in flight:
  // freeing one waits for its work, which is long done by then.
  std::vector<Batch> outs(4);
  int64_t next = 0;
  auto run = [&]() -> absl::Status { return plan.Run(in, args, &outs[next++ % outs.size()]); };
  for (int i = 0; i < 4; ++i) SLUICE_RETURN_IF_ERROR(run());  // warm-up
  std::vector<double> ms;
  for (int r = 0; r < runs; ++r) {
    SLUICE_ASSIGN_OR_RETURN(double t, runtime->TimeQueued(device, kReps, run));
    ms.push_back(t);
  }
  return Median(ms);
}

struct Ceilings {
  double d2d_gb_s = 0, h2d_pinned_gb_s = 0;
};

absl::StatusOr<Ceilings> MeasureCeilings(ops::DeviceRuntime* runtime, int device, int runs) {
  constexpr size_t kBytes = size_t{256} << 20;
  SLUICE_ASSIGN_OR_RETURN(void* stream, runtime->ThreadStream(device));
  SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> a, runtime->Allocate(kBytes, device, stream));
  SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> b, runtime->Allocate(kBytes, device, stream));
  std::shared_ptr<Buffer> pinned = runtime->StagingPool()->Allocate(kBytes);
  std::memset(pinned->data(), 1, kBytes);
  std::vector<double> d2d, h2d;
  for (int r = 0; r < runs; ++r) {
    SLUICE_ASSIGN_OR_RETURN(double copy_ms, runtime->TimeQueued(device, kReps, [&] {
      return runtime->CopyOnDevice(b->data(), a->data(), kBytes, stream);
    }));
    d2d.push_back(2.0 * kBytes / (copy_ms * 1e6));  // read + written
    SLUICE_ASSIGN_OR_RETURN(double upload_ms, runtime->TimeQueued(device, kReps, [&] {
      return runtime->CopyToDevice(a->data(), pinned->data(), kBytes, stream);
    }));
    h2d.push_back(kBytes / (upload_ms * 1e6));
  }
  SLUICE_RETURN_IF_ERROR(runtime->MarkReady({a, b}, stream, {pinned}));
  return Ceilings{Median(d2d), Median(h2d)};
}

size_t Bytes(const Batch& b) {
  size_t n = 0;
  for (const Column& c : b.columns) n += c.values.byte_size();
  return n;
}

// Each kernel case on device batches: ms a batch, GB/s, samples/s, and a
// memory-bound one's share of the copy bandwidth.
absl::StatusOr<nlohmann::json> MeasureKernels(ops::DeviceRuntime* runtime, int device, int runs, const Ceilings& ceil) {
  nlohmann::json kernels = nlohmann::json::array();
  std::printf("%-52s %12s %10s %14s\n", "kernel (batch on the device; 224x224x3 x 2048 unless named)", "ms/batch",
              "GB/s", "samples/s");
  for (const KernelCase& c : Cases()) {
    SLUICE_ASSIGN_OR_RETURN(CompiledMap m, CompileMap(c, runtime));
    SLUICE_ASSIGN_OR_RETURN(Batch in, RandomBatch(runtime, device, c.dtype, c.shape, c.rows, MemoryKind::kDevice));
    SLUICE_ASSIGN_OR_RETURN(double ms, TimeMap(*m.plan, in, runtime, device, runs));
    Batch out;
    SLUICE_RETURN_IF_ERROR(m.plan->Run(in, {}, &out));
    const double gb_s = static_cast<double>(Bytes(in) + Bytes(out)) / (ms * 1e6);
    const double samples = c.rows / (ms / 1e3);
    std::printf("%-52s %12.3f %10.1f %14.0f", c.name.c_str(), ms, gb_s, samples);
    nlohmann::json k{{"name", c.name}, {"ms_per_batch", ms}, {"gb_s", gb_s}, {"samples_per_s", samples}};
    if (c.memory_bound) {
      k["share_of_d2d"] = gb_s / ceil.d2d_gb_s;
      std::printf("  (%.0f%% of the copy)", 100 * gb_s / ceil.d2d_gb_s);
    }
    std::printf("\n");
    kernels.push_back(k);
    SLUICE_RETURN_IF_ERROR(runtime->Synchronize(*out.columns[0].values.buffer()));
  }
  return kernels;
}

// The transfer: W3's tail fed host batches (256 images), page-locked and
// pageable.
absl::StatusOr<nlohmann::json> MeasureTransfer(ops::DeviceRuntime* runtime, int device, int runs,
                                               const Ceilings& ceil) {
  nlohmann::json transfer;
  KernelCase tail = Cases()[3];
  tail.rows = 256;
  SLUICE_ASSIGN_OR_RETURN(CompiledMap m, CompileMap(tail, runtime));
  for (MemoryKind kind : {MemoryKind::kPinnedHost, MemoryKind::kHost}) {
    SLUICE_ASSIGN_OR_RETURN(Batch in, RandomBatch(runtime, device, tail.dtype, tail.shape, tail.rows, kind));
    SLUICE_ASSIGN_OR_RETURN(double ms, TimeMap(*m.plan, in, runtime, device, runs));
    const double gb_s = static_cast<double>(Bytes(in)) / (ms * 1e6);
    const std::string key = kind == MemoryKind::kHost ? "pageable" : "pinned";
    transfer[key] = {{"ms_per_batch", ms}, {"input_gb_s", gb_s}, {"share_of_h2d", gb_s / ceil.h2d_pinned_gb_s}};
    std::printf("\nW3 tail fed %-9s host batches: %.3f ms/batch, %.1f GB/s in (%.0f%% of the page-locked copy)",
                key.c_str(), ms, gb_s, 100 * gb_s / ceil.h2d_pinned_gb_s);
  }
  std::printf("\n");
  return transfer;
}

// torchvision v2 on CUDA (drawing per sample, as sluice does, and batched
// with one draw per batch) and the end-to-end runs into torch.
absl::Status RunPeers(const BenchArgs& args, int runs, nlohmann::json* j) {
  SLUICE_RETURN_IF_ERROR(EnsureData(args.data, true, true));
  if (!Exists(args.data + "/imagenet")) {
    SLUICE_RETURN_IF_ERROR(
        datagen::WriteSyntheticImageFolder(args.data + "/imagenet", 2000, 10, 1, [](int64_t, int64_t) {}));
  }
  nlohmann::json peer = PythonPeerJson("torchvision_gpu.py", absl::StrCat("--runs ", runs));
  if (!peer.is_null()) {
    (*j)["torchvision"] = peer;
    const nlohmann::json& kernels = (*j)["kernels"];
    const double blur = kernels[5]["samples_per_s"].get<double>(), warp = kernels[7]["samples_per_s"].get<double>();
    for (const auto& [name, rate] : {std::pair<std::string, double>{"blur", blur}, {"warp", warp}}) {
      const double per_sample = peer[name + "_samples_per_s"].get<double>();
      const double batched = peer[name + "_batched_samples_per_s"].get<double>();
      (*j)["ratio_" + name + "_vs_torchvision"] = rate / per_sample;
      (*j)["ratio_" + name + "_vs_torchvision_batched"] = rate / batched;
      std::printf(
          "torchvision.transforms.v2 on CUDA, %s: %.0f samples/s drawing per sample (sluice %.1fx), %.0f "
          "batched with one draw per batch (sluice %.2fx)\n",
          name.c_str(), per_sample, rate / per_sample, batched, rate / batched);
    }
  }
  nlohmann::json e2e = PythonPeerJson("gpu_end_to_end.py", absl::StrCat("--data ", args.data, " --runs ", runs));
  if (!e2e.is_null()) (*j)["end_to_end"] = e2e;
  return absl::OkStatus();
}

}  // namespace

absl::Status BenchGpu(const BenchArgs& args) {
  ops::DeviceRuntime* runtime = ops::OpRegistry::Global().runtime(ops::Backend::kCuda);
  if (runtime == nullptr) {
    return absl::FailedPreconditionError(
        "this sluice was built without the cuda backend (configure with -DSLUICE_WITH_CUDA=ON)");
  }
  SLUICE_RETURN_IF_ERROR(runtime->CheckAvailable());
  const int device = runtime->CurrentDevice();
  const int runs = std::max(args.runs, 3);
  nlohmann::json j;
  j["bench"] = "gpu";
  j["machine"] = MachineDescription();
  j["device"] = runtime->Describe(device);
  std::printf("device: %s; host: %s\n\n", j["device"].get<std::string>().c_str(), MachineDescription().c_str());

  SLUICE_ASSIGN_OR_RETURN(const Ceilings ceil, MeasureCeilings(runtime, device, runs));
  j["d2d_copy_gb_s"] = ceil.d2d_gb_s;
  j["h2d_pinned_gb_s"] = ceil.h2d_pinned_gb_s;
  std::printf("device-to-device copy  %8.1f GB/s (read + written)\n", ceil.d2d_gb_s);
  std::printf("host-to-device copy    %8.1f GB/s (page-locked)\n\n", ceil.h2d_pinned_gb_s);
  SLUICE_ASSIGN_OR_RETURN(j["kernels"], MeasureKernels(runtime, device, runs, ceil));
  SLUICE_ASSIGN_OR_RETURN(j["transfer"], MeasureTransfer(runtime, device, runs, ceil));
  const ops::DeviceRuntime::MemoryStats mem = runtime->Memory(device);
  j["device_pool"] = {{"reserved_bytes", mem.reserved_bytes},
                      {"peak_reserved_bytes", mem.peak_reserved_bytes},
                      {"limit_bytes", mem.limit_bytes}};
  if (!args.no_peers) SLUICE_RETURN_IF_ERROR(RunPeers(args, runs, &j));
  if (args.json) std::printf("%s\n", j.dump().c_str());
  return absl::OkStatus();
}

}  // namespace sluice::bench
