// A device backend's runtime, as the executor and the consumers of device
// tensors need it: streams, pooled memory, copies and readiness. The cuda
// backend registers one (ops/cuda/) in builds with SLUICE_WITH_CUDA; the
// executor never includes CUDA headers.
//
// A device map queues its copies and kernels on its runner's stream and
// does not wait for them: its output buffers carry an event recorded after
// the work (MarkReady). A consumer either makes its own stream wait on that
// event (WaitReady: no host wait; what DLPack's stream argument asks for)
// or blocks until it fires (Synchronize).
#ifndef SLUICE_OPS_DEVICE_RUNTIME_H_
#define SLUICE_OPS_DEVICE_RUNTIME_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

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
  // "NVIDIA H100 80GB HBM3 (sm_90, 79.2 GiB)": what a benchmark's figures
  // were measured on.
  virtual std::string Describe(int device) const = 0;
  // The calling thread's stream on `device`, created on first use and kept
  // for the thread's life (an opaque cudaStream_t for cuda).
  virtual absl::StatusOr<void*> ThreadStream(int device) = 0;

  // `bytes` of device memory from the device's pool, usable by work queued
  // on `stream` from now on; back to the pool, in stream order, when the
  // last reference goes. ResourceExhausted naming the pool's bound when
  // the pool would grow past it.
  virtual absl::StatusOr<std::shared_ptr<Buffer>> Allocate(size_t bytes, int device, void* stream) = 0;
  // Page-locked host memory, pooled: what host-to-device copies read at
  // the bus's full rate and without blocking.
  virtual BufferPool* StagingPool() = 0;
  // Queues a host-to-device copy on `stream`. `host_src` must stay as it is
  // until the copy is done: see MarkReady's keep_alive.
  virtual absl::Status CopyToDevice(uint8_t* device_dst, const uint8_t* host_src, size_t bytes, void* stream) = 0;

  // Queues a copy within device memory on `stream`.
  virtual absl::Status CopyOnDevice(uint8_t* device_dst, const uint8_t* device_src, size_t bytes, void* stream) = 0;

  // Device time of the work `queue` puts on the calling thread's stream of
  // `device`, run `reps` times between two events: milliseconds per run
  // (benchmarks).
  virtual absl::StatusOr<double> TimeQueued(int device, int reps, const std::function<absl::Status()>& queue) = 0;

  // Marks `outputs` (buffers of this runtime) as written by the work queued
  // on `stream` so far; `keep_alive` (the host buffers that work reads)
  // is held until it is done.
  virtual absl::Status MarkReady(const std::vector<std::shared_ptr<Buffer>>& outputs, void* stream,
                                 std::vector<std::shared_ptr<Buffer>> keep_alive) = 0;
  // Makes `consumer_stream` wait until `buffer` is ready, without blocking
  // the calling thread; the buffer then goes back to the pool in that
  // stream's order, so the consumer's queued reads finish first.
  virtual absl::Status WaitReady(const Buffer& buffer, void* consumer_stream) = 0;
  // Blocks until `buffer` is ready; the first error the work writing it hit.
  virtual absl::Status Synchronize(const Buffer& buffer) = 0;
  // What a C++ consumer needs to order its own work after `buffer`'s: the
  // stream that wrote it and the event recorded after (cudaStream_t,
  // cudaEvent_t; null for a buffer never marked ready).
  struct Readiness {
    void* stream = nullptr;
    void* event = nullptr;
  };
  virtual Readiness ReadinessOf(const Buffer& buffer) const = 0;

  // The device memory pool of `device`.
  struct MemoryStats {
    size_t in_use_bytes = 0;    // held by buffers and scratch
    size_t reserved_bytes = 0;  // taken from the driver, in use or cached
    size_t peak_reserved_bytes = 0;
    size_t limit_bytes = 0;  // the bound Allocate keeps to
  };
  virtual MemoryStats Memory(int device) const = 0;
};

}  // namespace sluice::ops

#endif  // SLUICE_OPS_DEVICE_RUNTIME_H_
