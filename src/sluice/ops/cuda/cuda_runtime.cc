#include "sluice/ops/cuda/cuda_runtime.h"

#include <atomic>
#include <limits>
#include <map>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "sluice/core/environment_number.h"
#include "sluice/ops/builtin_ops.h"

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

// One memory pool per device, made on first use and kept for the process.
class DevicePools {
 public:
  static DevicePools& Get() {
    static DevicePools* pools = new DevicePools();
    return *pools;
  }

  absl::StatusOr<cudaMemPool_t> Pool(int device) {
    absl::MutexLock lock(&mu_);
    auto it = pools_.find(device);
    if (it != pools_.end()) return it->second.pool;
    cudaMemPoolProps props = {};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    cudaMemPool_t pool;
    if (absl::Status s = CudaStatus(cudaMemPoolCreate(&pool, &props), "creating the device memory pool"); !s.ok()) {
      return s;
    }
    // Keep what was taken from the driver: the next batch reuses it.
    uint64_t keep = std::numeric_limits<uint64_t>::max();
    cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
    size_t free_bytes = 0, total_bytes = 0;
    cudaSetDevice(device);
    cudaMemGetInfo(&free_bytes, &total_bytes);
    pools_.emplace(device, Entry{pool, LimitBytes(total_bytes)});
    return pool;
  }

  size_t Limit(int device) const {
    absl::MutexLock lock(&mu_);
    auto it = pools_.find(device);
    return it == pools_.end() ? 0 : it->second.limit;
  }

 private:
  struct Entry {
    cudaMemPool_t pool;
    size_t limit;
  };
  static size_t LimitBytes(size_t total) {
    return static_cast<size_t>(IntFromEnvironment("SLUICE_CUDA_MEMORY_LIMIT", static_cast<int64_t>(total / 4), 1));
  }
  mutable absl::Mutex mu_;
  std::map<int, Entry> pools_ ABSL_GUARDED_BY(mu_);
};

uint64_t PoolAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr) {
  uint64_t value = 0;
  cudaMemPoolGetAttribute(pool, attr, &value);
  return value;
}

// The event recorded after the work that wrote a run's outputs, shared by
// those outputs, with the host buffers that work reads.
struct ReadyState {
  cudaEvent_t event = nullptr;
  cudaStream_t stream = nullptr;
  std::vector<std::shared_ptr<Buffer>> keep_alive;

  ~ReadyState() {
    // A copy may still read the host buffers: they go back only after it.
    if (!keep_alive.empty()) cudaEventSynchronize(event);
    cudaEventDestroy(event);
  }
};

// What a device Buffer owns: its pool memory, back in stream order.
struct DeviceBlock {
  void* data = nullptr;
  cudaStream_t stream = nullptr;      // the allocating runner's, alive during its run
  std::shared_ptr<ReadyState> ready;  // set before the buffer is shared
  std::atomic<cudaStream_t> consumer{nullptr};

  ~DeviceBlock() {
    if (data == nullptr) return;
    if (cudaStream_t c = consumer.load(); c != nullptr) {
      cudaFreeAsync(data, c);  // after the consumer's queued reads
    } else if (ready != nullptr) {
      // The producing stream may be gone with its thread: wait for the
      // writes, then free on this thread's stream.
      cudaEventSynchronize(ready->event);
      cudaFreeAsync(data, cudaStreamPerThread);
    } else {
      cudaFreeAsync(data, stream);  // scratch of a run still in progress
    }
  }
};

DeviceBlock* BlockOf(const Buffer& buffer) {
  return buffer.memory_kind() == MemoryKind::kDevice ? static_cast<DeviceBlock*>(buffer.owner().get()) : nullptr;
}

void* AllocatePinned(size_t bytes) {
  void* data = nullptr;
  return cudaHostAlloc(&data, bytes, cudaHostAllocPortable) == cudaSuccess ? data : nullptr;
}

void FreePinned(void* data) { cudaFreeHost(data); }

class CudaRuntime : public DeviceRuntime {
 public:
  CudaRuntime() : staging_(StagingOptions()) {}

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

  std::string Describe(int device) const override {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) return absl::StrCat("CUDA device ", device);
    return absl::StrFormat("%s (sm_%d%d, %.1f GiB)", prop.name, prop.major, prop.minor,
                           static_cast<double>(prop.totalGlobalMem) / (1 << 30));
  }

  absl::StatusOr<void*> ThreadStream(int device) override { return tls_streams.Get(device); }

  absl::StatusOr<std::shared_ptr<Buffer>> Allocate(size_t bytes, int device, void* stream) override {
    if (absl::Status s = CudaStatus(cudaSetDevice(device), "cudaSetDevice"); !s.ok()) return s;
    auto block = std::make_shared<DeviceBlock>();
    block->stream = static_cast<cudaStream_t>(stream);
    if (bytes > 0) {
      absl::StatusOr<void*> data = AllocateAsync(bytes, block->stream);
      if (!data.ok()) return data.status();
      block->data = *data;
    }
    uint8_t* data = static_cast<uint8_t*>(block->data);
    return Buffer::Adopt(data, bytes, std::move(block), MemoryKind::kDevice, device);
  }

  BufferPool* StagingPool() override { return &staging_; }

  absl::Status CopyToDevice(uint8_t* device_dst, const uint8_t* host_src, size_t bytes, void* stream) override {
    return CudaStatus(
        cudaMemcpyAsync(device_dst, host_src, bytes, cudaMemcpyHostToDevice, static_cast<cudaStream_t>(stream)),
        "cudaMemcpyAsync to the device");
  }

  absl::Status CopyOnDevice(uint8_t* device_dst, const uint8_t* device_src, size_t bytes, void* stream) override {
    return CudaStatus(
        cudaMemcpyAsync(device_dst, device_src, bytes, cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(stream)),
        "cudaMemcpyAsync on the device");
  }

  absl::StatusOr<double> TimeQueued(int device, int reps, const std::function<absl::Status()>& queue) override {
    absl::StatusOr<void*> stream = ThreadStream(device);
    if (!stream.ok()) return stream.status();
    const auto s = static_cast<cudaStream_t>(*stream);
    cudaEvent_t start, stop;
    if (absl::Status e = CudaStatus(cudaEventCreate(&start), "cudaEventCreate"); !e.ok()) return e;
    if (absl::Status e = CudaStatus(cudaEventCreate(&stop), "cudaEventCreate"); !e.ok()) {
      cudaEventDestroy(start);
      return e;
    }
    absl::Status status = CudaStatus(cudaEventRecord(start, s), "cudaEventRecord");
    for (int i = 0; i < reps && status.ok(); ++i) status = queue();
    if (status.ok()) status = CudaStatus(cudaEventRecord(stop, s), "cudaEventRecord");
    if (status.ok()) status = CudaStatus(cudaEventSynchronize(stop), "the timed work");
    float ms = 0;
    if (status.ok()) status = CudaStatus(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    if (!status.ok()) return status;
    return static_cast<double>(ms) / reps;
  }

  absl::Status MarkReady(const std::vector<std::shared_ptr<Buffer>>& outputs, void* stream,
                         std::vector<std::shared_ptr<Buffer>> keep_alive) override {
    auto ready = std::make_shared<ReadyState>();
    ready->stream = static_cast<cudaStream_t>(stream);
    if (absl::Status s = CudaStatus(cudaEventCreateWithFlags(&ready->event, cudaEventDisableTiming), "cudaEventCreate");
        !s.ok()) {
      return s;
    }
    ready->keep_alive = std::move(keep_alive);
    if (absl::Status s = CudaStatus(cudaEventRecord(ready->event, ready->stream), "cudaEventRecord"); !s.ok()) {
      return s;
    }
    for (const std::shared_ptr<Buffer>& buffer : outputs) {
      if (DeviceBlock* block = BlockOf(*buffer); block != nullptr) block->ready = ready;
    }
    return absl::OkStatus();
  }

  absl::Status WaitReady(const Buffer& buffer, void* consumer_stream) override {
    DeviceBlock* block = BlockOf(buffer);
    if (block == nullptr) return absl::OkStatus();
    const auto consumer = static_cast<cudaStream_t>(consumer_stream);
    if (block->ready != nullptr) {
      absl::Status s = CudaStatus(cudaStreamWaitEvent(consumer, block->ready->event, 0), "cudaStreamWaitEvent");
      if (!s.ok()) return s;
    }
    block->consumer.store(consumer);
    return absl::OkStatus();
  }

  absl::Status Synchronize(const Buffer& buffer) override {
    DeviceBlock* block = BlockOf(buffer);
    if (block == nullptr || block->ready == nullptr) return absl::OkStatus();
    return CudaStatus(cudaEventSynchronize(block->ready->event), "the work writing a device tensor");
  }

  Readiness ReadinessOf(const Buffer& buffer) const override {
    DeviceBlock* block = BlockOf(buffer);
    if (block == nullptr || block->ready == nullptr) return {};
    return {block->ready->stream, block->ready->event};
  }

  MemoryStats Memory(int device) const override {
    MemoryStats stats;
    absl::StatusOr<cudaMemPool_t> pool = DevicePools::Get().Pool(device);
    if (!pool.ok()) return stats;
    stats.in_use_bytes = PoolAttribute(*pool, cudaMemPoolAttrUsedMemCurrent);
    stats.reserved_bytes = PoolAttribute(*pool, cudaMemPoolAttrReservedMemCurrent);
    stats.peak_reserved_bytes = PoolAttribute(*pool, cudaMemPoolAttrReservedMemHigh);
    stats.limit_bytes = DevicePools::Get().Limit(device);
    return stats;
  }

 private:
  static BufferPool::Options StagingOptions() {
    BufferPool::Options options;
    // The batches in flight between the nodes feeding device maps and the
    // maps' copies (a W3 batch is 38.5 MB): past this, blocks go back to
    // the driver and come again at cudaHostAlloc's cost, milliseconds each.
    options.max_cached_bytes = size_t{1} << 30;
    options.allocate = AllocatePinned;
    options.release = FreePinned;
    options.kind = MemoryKind::kPinnedHost;
    return options;
  }

  BufferPool staging_;
};

}  // namespace

absl::Status CudaStatus(cudaError_t error, absl::string_view what) {
  if (error == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorName(error), ": ", cudaGetErrorString(error)));
}

absl::StatusOr<void*> AllocateAsync(size_t bytes, cudaStream_t stream) {
  int device = 0;
  if (absl::Status s = CudaStatus(cudaGetDevice(&device), "cudaGetDevice"); !s.ok()) return s;
  DevicePools& pools = DevicePools::Get();
  absl::StatusOr<cudaMemPool_t> pool = pools.Pool(device);
  if (!pool.ok()) return pool.status();
  const size_t limit = pools.Limit(device);
  const uint64_t used = PoolAttribute(*pool, cudaMemPoolAttrUsedMemCurrent);
  if (used + bytes > limit) {
    return absl::ResourceExhaustedError(
        absl::StrCat("device ", device, "'s memory pool would hold ", used + bytes, " bytes, over its bound of ", limit,
                     " (SLUICE_CUDA_MEMORY_LIMIT sets it; fewer batches in flight or smaller batches use less)"));
  }
  void* data = nullptr;
  if (absl::Status s = CudaStatus(cudaMallocFromPoolAsync(&data, bytes, *pool, stream),
                                  absl::StrCat("allocating ", bytes, " bytes of device memory"));
      !s.ok()) {
    return s;
  }
  return data;
}

std::unique_ptr<DeviceRuntime> MakeCudaRuntime() { return std::make_unique<CudaRuntime>(); }

ElemType ElemTypeOf(DType dtype) {
  switch (dtype) {
    case DType::kUInt8:
      return ElemType::kUInt8;
    case DType::kInt32:
      return ElemType::kInt32;
    case DType::kInt64:
      return ElemType::kInt64;
    case DType::kFloat32:
      return ElemType::kFloat32;
    case DType::kFloat16:
      break;
  }
  return ElemType::kFloat16;
}

absl::Status RegisterCudaRuntime(OpRegistry* registry) { return registry->AddRuntime(MakeCudaRuntime()); }

}  // namespace sluice::ops::cuda
