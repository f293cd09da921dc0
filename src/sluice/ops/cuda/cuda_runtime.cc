#include "sluice/ops/cuda/cuda_runtime.h"

#include <map>

#include "absl/strings/str_cat.h"

namespace sluice::ops::cuda {
namespace {

// The calling thread's streams, one per device, destroyed with the thread.
class ThreadStreams {
 public:
  ~ThreadStreams() {
    for (const auto& [device, stream] : streams_) cudaStreamDestroy(stream);
  }
  absl::StatusOr<void*> Get(int device) {
    auto it = streams_.find(device);
    if (it != streams_.end()) return static_cast<void*>(it->second);
    if (absl::Status s = CudaStatus(cudaSetDevice(device), "cudaSetDevice"); !s.ok()) return s;
    cudaStream_t stream;
    // Non-blocking: it does not wait for work on the legacy default stream.
    if (absl::Status s = CudaStatus(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
        !s.ok()) {
      return s;
    }
    streams_.emplace(device, stream);
    return static_cast<void*>(stream);
  }

 private:
  std::map<int, cudaStream_t> streams_;
};

thread_local ThreadStreams tls_streams;

class CudaRuntime : public DeviceRuntime {
 public:
  Backend backend() const override { return Backend::kCuda; }

  absl::Status CheckAvailable() const override {
    int count = 0;
    const cudaError_t error = cudaGetDeviceCount(&count);
    if (error != cudaSuccess) {
      return absl::FailedPreconditionError(absl::StrCat("no CUDA device can be used: ", cudaGetErrorString(error)));
    }
    if (count == 0) return absl::FailedPreconditionError("no CUDA device can be used: none was found");
    return absl::OkStatus();
  }

  int CurrentDevice() const override {
    int device = 0;
    return cudaGetDevice(&device) == cudaSuccess ? device : 0;
  }

  absl::StatusOr<void*> ThreadStream(int device) override { return tls_streams.Get(device); }

  absl::StatusOr<std::shared_ptr<Buffer>> Allocate(size_t bytes, int device, void* stream) override {
    void* data = nullptr;
    if (bytes > 0) {
      if (absl::Status s = CudaStatus(cudaSetDevice(device), "cudaSetDevice"); !s.ok()) return s;
      if (absl::Status s = CudaStatus(cudaMalloc(&data, bytes), absl::StrCat("cudaMalloc of ", bytes, " bytes"));
          !s.ok()) {
        return s;
      }
    }
    std::shared_ptr<void> owner(data, [](void* p) {
      if (p != nullptr) cudaFree(p);
    });
    return Buffer::Adopt(static_cast<uint8_t*>(data), bytes, std::move(owner), MemoryKind::kDevice, device);
  }

  absl::Status CopyToDevice(uint8_t* device_dst, const uint8_t* host_src, size_t bytes, void* stream) override {
    return CudaStatus(
        cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice, static_cast<cudaStream_t>(stream)),
        "cudaMemcpyAsync to the device");
  }

  absl::Status Synchronize(void* stream) override {
    return CudaStatus(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "a kernel on the device");
  }
};

}  // namespace

absl::Status CudaStatus(cudaError_t error, absl::string_view what) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorName(error), ": ", cudaGetErrorString(error)));
}

std::unique_ptr<DeviceRuntime> MakeCudaRuntime() { return std::make_unique<CudaRuntime>(); }

}  // namespace sluice::ops::cuda
