#include "sluice/ops/cuda/device_scratch.h"

#include "sluice/ops/cuda/cuda_runtime.h"

namespace sluice::ops::cuda {

absl::StatusOr<DeviceScratch> DeviceScratch::Allocate(size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return DeviceScratch(nullptr, stream);
  absl::StatusOr<void*> data = AllocateAsync(bytes, stream);
  if (!data.ok()) return data.status();
  return DeviceScratch(*data, stream);
}

absl::StatusOr<DeviceScratch> DeviceScratch::Upload(const void* host, size_t bytes, cudaStream_t stream) {
  absl::StatusOr<DeviceScratch> scratch = Allocate(bytes, stream);
  if (!scratch.ok() || bytes == 0) return scratch;
  if (absl::Status s = CudaStatus(cudaMemcpyAsync(scratch->data_, host, bytes, cudaMemcpyHostToDevice, stream),
                                  "copying per-sample parameters to the device");
      !s.ok()) {
    return s;
  }
  return scratch;
}

DeviceScratch& DeviceScratch::operator=(DeviceScratch&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) cudaFreeAsync(data_, stream_);
    data_ = other.data_;
    stream_ = other.stream_;
    other.data_ = nullptr;
  }
  return *this;
}

DeviceScratch::~DeviceScratch() {
  if (data_ != nullptr) cudaFreeAsync(data_, stream_);
}

}  // namespace sluice::ops::cuda
