// Device memory a cuda kernel needs for one run: per-sample parameters drawn
// on the host, intermediate planes. It comes from the device's
// stream-ordered pool on the run's stream and goes back to it in stream
// order, so a run neither allocates from the driver nor waits for its own
// launches.
#ifndef SLUICE_OPS_CUDA_DEVICE_SCRATCH_H_
#define SLUICE_OPS_CUDA_DEVICE_SCRATCH_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "sluice/ops/kernel.h"

namespace sluice::ops::cuda {

// The run's stream.
inline cudaStream_t Stream(const KernelContext& ctx) { return static_cast<cudaStream_t>(ctx.stream); }

// Move-only. Freed (cudaFreeAsync on its stream) when destroyed: destroy it
// after the launches that use it are queued, never before.
class DeviceScratch {
 public:
  static absl::StatusOr<DeviceScratch> Allocate(size_t bytes, cudaStream_t stream);
  // Allocates and queues a copy of `bytes` bytes of host memory. The host
  // memory may be reused as soon as this returns (pageable copies are
  // staged by the driver before the call returns).
  static absl::StatusOr<DeviceScratch> Upload(const void* host, size_t bytes, cudaStream_t stream);

  DeviceScratch(DeviceScratch&& other) noexcept : data_(other.data_), stream_(other.stream_) { other.data_ = nullptr; }
  DeviceScratch& operator=(DeviceScratch&& other) noexcept;
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;
  ~DeviceScratch();

  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  DeviceScratch(void* data, cudaStream_t stream) : data_(data), stream_(stream) {}
  void* data_;
  cudaStream_t stream_;
};

}  // namespace sluice::ops::cuda

#endif  // SLUICE_OPS_CUDA_DEVICE_SCRATCH_H_
