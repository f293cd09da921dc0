// What the cuda op tests share: a pipeline's first batch or all of them,
// whether a GPU can be used, a device column's bytes back on the host, and
// a map on "cuda" against the same map on the cpu.
#ifndef SLUICE_TESTS_OPS_CUDA_CUDA_TEST_UTIL_H_
#define SLUICE_TESTS_OPS_CUDA_CUDA_TEST_UTIL_H_

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "sluice/exec/pipeline.h"
#include "sluice/ops/device_runtime.h"
#include "sluice/ops/op_registry.h"
#include "sluice/pipeline_builder.h"

namespace sluice::ops::cuda_testing {

inline DeviceRuntime* CudaRuntime() { return OpRegistry::Global().runtime(Backend::kCuda); }

// OK, or why no GPU can be used (what a skipped test says).
inline absl::Status GpuAvailable() { return CudaRuntime()->CheckAvailable(); }

inline absl::StatusOr<Batch> FirstBatch(const PipelineDef& def) {
  absl::StatusOr<std::unique_ptr<exec::Pipeline>> pipeline = exec::Pipeline::Create(def);
  if (!pipeline.ok()) return pipeline.status();
  std::unique_ptr<exec::PipelineIterator> it = (*pipeline)->Iterate();
  Batch b;
  bool end = false;
  if (absl::Status s = it->Next(&b, &end); !s.ok()) return s;
  return b;
}

// Every batch of `def`, all taken before any is read back (the device's
// work for one overlaps the next's).
inline absl::StatusOr<std::vector<Batch>> AllBatches(const PipelineDef& def) {
  absl::StatusOr<std::unique_ptr<exec::Pipeline>> pipeline = exec::Pipeline::Create(def);
  if (!pipeline.ok()) return pipeline.status();
  std::unique_ptr<exec::PipelineIterator> it = (*pipeline)->Iterate();
  std::vector<Batch> batches;
  while (true) {
    Batch b;
    bool end = false;
    if (absl::Status s = it->Next(&b, &end); !s.ok()) return s;
    if (end) return batches;
    batches.push_back(std::move(b));
  }
}

// `t`'s bytes on the host: a device tensor's once the work writing it is
// done (the executor hands batches on before that).
inline absl::StatusOr<std::vector<uint8_t>> HostBytes(const Tensor& t) {
  std::vector<uint8_t> bytes(t.byte_size());
  if (t.memory_kind() != MemoryKind::kDevice) {
    std::copy(t.raw_data(), t.raw_data() + bytes.size(), bytes.begin());
    return bytes;
  }
  if (absl::Status s = CudaRuntime()->Synchronize(*t.buffer()); !s.ok()) return s;
  if (cudaMemcpy(bytes.data(), t.raw_data(), bytes.size(), cudaMemcpyDeviceToHost) != cudaSuccess) {
    return absl::InternalError("cudaMemcpy of a device tensor failed");
  }
  return bytes;
}

// The cuda kernels' output `gpu` against the cpu kernels' `cpu`: the same
// shape and dtype; float32 within 1e-5 relative (absolute under 1), with
// the cpu's infinities and NaNs; uint8 within `uint8_levels`; other
// dtypes the same bytes.
inline void ExpectSameValues(const Tensor& cpu, const Tensor& gpu, int uint8_levels) {
  ASSERT_EQ(gpu.memory_kind(), MemoryKind::kDevice);
  ASSERT_EQ(gpu.shape(), cpu.shape());
  ASSERT_EQ(gpu.dtype(), cpu.dtype());
  absl::StatusOr<std::vector<uint8_t>> back = HostBytes(gpu);
  ASSERT_TRUE(back.ok()) << back.status();
  if (cpu.dtype() == DType::kFloat32) {
    const float* want = cpu.data<float>();
    const float* got = reinterpret_cast<const float*>(back->data());
    for (int64_t i = 0; i < cpu.num_elements(); ++i) {
      if (got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i]))) continue;
      ASSERT_NEAR(got[i], want[i], 1e-5f * std::max(1.f, std::abs(want[i]))) << "value " << i;
    }
  } else if (cpu.dtype() == DType::kUInt8) {
    const uint8_t* want = cpu.raw_data();
    for (size_t i = 0; i < back->size(); ++i) {
      ASSERT_LE(std::abs((*back)[i] - want[i]), uint8_levels) << "value " << i;
    }
  } else {
    const size_t size = DTypeSize(cpu.dtype());
    for (size_t i = 0; i < back->size(); i += size) {
      ASSERT_EQ(std::memcmp(back->data() + i, cpu.raw_data() + i, size), 0) << "value " << i / size;
    }
  }
}

// `source` batched whole (`rows` a batch) and mapped by `op` on the cpu and
// on "cuda": the same shape, dtype and values (ExpectSameValues, uint8
// within `uint8_levels`).
inline void ExpectCudaMapEqualsCpu(const PipelineBuilder& source, int rows, const OpSpec& op, int uint8_levels = 0) {
  absl::StatusOr<Batch> cpu = FirstBatch(PipelineBuilder(source).Batch(rows).Map({op}).Build());
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  absl::StatusOr<Batch> gpu = FirstBatch(PipelineBuilder(source).Batch(rows).Map({op}, 0, "cuda").Build());
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  ExpectSameValues(cpu->columns[0].values, gpu->columns[0].values, uint8_levels);
}

}  // namespace sluice::ops::cuda_testing

#endif  // SLUICE_TESTS_OPS_CUDA_CUDA_TEST_UTIL_H_
