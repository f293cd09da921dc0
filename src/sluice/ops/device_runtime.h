// A device backend's runtime, as the executor needs it for a map that runs
// on that device: streams, memory and copies. The cuda backend registers one
// (ops/cuda/) in builds with SLUICE_WITH_CUDA; the executor never includes
// CUDA headers.
#ifndef SLUICE_OPS_DEVICE_RUNTIME_H_
#define SLUICE_OPS_DEVICE_RUNTIME_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "sluice/core/buffer_pool.h"
#include "sluice/ops/kernel.h"

namespace sluice::ops {

// Thread-safe.
class DeviceRuntime {
 public:
  virtual ~DeviceRuntime() = default;

  virtual Backend backend() const = 0;
  // OK when a device can be used; FailedPrecondition saying why not (no
  // device, no driver) otherwise.
  virtual absl::Status CheckAvailable() const = 0;
  // The device new work goes to.
  virtual int CurrentDevice() const = 0;
  // The calling thread's stream on `device`, created on first use and kept
  // for the thread's life (an opaque cudaStream_t for cuda).
  virtual absl::StatusOr<void*> ThreadStream(int device) = 0;
  // `bytes` of device memory, usable by work queued on `stream` from now
  // on; freed when the last reference goes.
  virtual absl::StatusOr<std::shared_ptr<Buffer>> Allocate(size_t bytes, int device, void* stream) = 0;
  // Queues a host-to-device copy on `stream`.
  virtual absl::Status CopyToDevice(uint8_t* device_dst, const uint8_t* host_src, size_t bytes,
                                    void* stream) = 0;
  // Waits until everything queued on `stream` is done; the first error a
  // kernel launch left on the stream.
  virtual absl::Status Synchronize(void* stream) = 0;
};

}  // namespace sluice::ops

#endif  // SLUICE_OPS_DEVICE_RUNTIME_H_
