// The cuda runtime: pooled and bounded device memory, page-locked staging,
// outputs handed on before the GPU is done with them and ordered after it
// by their event, for the host (Synchronize) and for another stream
// (WaitReady). GPU tests skip, saying why, where there is none.
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <numeric>

#include "cuda_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/exec/pipeline.h"
#include "sluice/pipeline_builder.h"
#include "status_matchers.h"
#include "temp_dir.h"
#include "test_data.h"

namespace sluice::ops {
namespace {

using ::sluice::testing::StatusIs;
using ::testing::HasSubstr;

using cuda_testing::GpuAvailable;
using cuda_testing::HostBytes;

DeviceRuntime* Runtime() { return cuda_testing::CudaRuntime(); }

#define SKIP_WITHOUT_GPU()                            \
  if (absl::Status gpu = GpuAvailable(); !gpu.ok()) { \
    GTEST_SKIP() << gpu.message();                    \
  }

TEST(CudaRuntime, StagingMemoryIsPageLockedAndPooled) {
  SKIP_WITHOUT_GPU();
  BufferPool* staging = Runtime()->StagingPool();
  uint8_t* first;
  {
    std::shared_ptr<Buffer> b = staging->Allocate(1 << 20);
    EXPECT_EQ(b->memory_kind(), MemoryKind::kPinnedHost);
    cudaPointerAttributes attrs;
    ASSERT_EQ(cudaPointerGetAttributes(&attrs, b->data()), cudaSuccess);
    EXPECT_EQ(attrs.type, cudaMemoryTypeHost) << "cudaHostAlloc'd memory";
    first = b->data();
  }
  EXPECT_EQ(staging->Allocate(1 << 20)->data(), first) << "the block was reused, not allocated again";
}

TEST(CudaRuntime, DeviceMemoryComesBackToThePoolAndIsReused) {
  SKIP_WITHOUT_GPU();
  const int device = Runtime()->CurrentDevice();
  ASSERT_OK_AND_ASSIGN(void* stream, Runtime()->ThreadStream(device));
  for (int i = 0; i < 3; ++i) {  // reach the steady state
    ASSERT_OK_AND_ASSIGN(std::shared_ptr<Buffer> b, Runtime()->Allocate(64 << 20, device, stream));
  }
  const size_t reserved = Runtime()->Memory(device).reserved_bytes;
  for (int i = 0; i < 50; ++i) {
    ASSERT_OK_AND_ASSIGN(std::shared_ptr<Buffer> b, Runtime()->Allocate(64 << 20, device, stream));
    EXPECT_EQ(b->memory_kind(), MemoryKind::kDevice);
  }
  ASSERT_EQ(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), cudaSuccess);
  EXPECT_EQ(Runtime()->Memory(device).reserved_bytes, reserved) << "50 batches took nothing more from the driver";
}

TEST(CudaRuntime, TheDevicePoolIsBoundedAndSaysSo) {
  SKIP_WITHOUT_GPU();
  const int device = Runtime()->CurrentDevice();
  ASSERT_OK_AND_ASSIGN(void* stream, Runtime()->ThreadStream(device));
  const size_t limit = Runtime()->Memory(device).limit_bytes;
  ASSERT_GT(limit, 0u);
  EXPECT_THAT(Runtime()->Allocate(limit + 1, device, stream),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("over its bound of " + std::to_string(limit))));
}

TEST(CudaRuntime, OutputsAreOrderedAfterTheirWorkForTheHostAndForAnotherStream) {
  SKIP_WITHOUT_GPU();
  const int device = Runtime()->CurrentDevice();
  ASSERT_OK_AND_ASSIGN(void* stream, Runtime()->ThreadStream(device));
  constexpr size_t kBytes = 64 << 20;
  std::shared_ptr<Buffer> host = Runtime()->StagingPool()->Allocate(kBytes);
  for (size_t i = 0; i < kBytes; ++i) host->data()[i] = static_cast<uint8_t>(i * 7 + 3);
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<Buffer> d, Runtime()->Allocate(kBytes, device, stream));
  SLUICE_ASSERT_OK(Runtime()->CopyToDevice(d->data(), host->data(), kBytes, stream));
  SLUICE_ASSERT_OK(Runtime()->MarkReady({d}, stream, {host}));
  const DeviceRuntime::Readiness ready = Runtime()->ReadinessOf(*d);
  EXPECT_EQ(ready.stream, stream);
  EXPECT_NE(ready.event, nullptr);

  // Another stream reads it after waiting on its event.
  cudaStream_t consumer;
  ASSERT_EQ(cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking), cudaSuccess);
  SLUICE_ASSERT_OK(Runtime()->WaitReady(*d, consumer));
  std::vector<uint8_t> back(kBytes);
  ASSERT_EQ(cudaMemcpyAsync(back.data(), d->data(), kBytes, cudaMemcpyDeviceToHost, consumer), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(consumer), cudaSuccess);
  for (size_t i = 0; i < kBytes; i += 4099) ASSERT_EQ(back[i], static_cast<uint8_t>(i * 7 + 3)) << i;
  d.reset();  // freed on the consumer's stream
  ASSERT_EQ(cudaStreamSynchronize(consumer), cudaSuccess);
  cudaStreamDestroy(consumer);
}

// A cuda map's batches, each read after Synchronize.
std::vector<float> RunRescale() {
  constexpr int kRows = 64;
  std::vector<uint8_t> pixels(kRows * 9 * 11 * 3);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>((i * 131 + 7) % 251);
  PipelineDef def = PipelineBuilder::Arrays({MakeArrayColumn("image", {9, 11, 3}, pixels)})
                        .Batch(16)
                        .Map({Op("rescale", {{"scale", 0.5}})}, 0, "cuda")
                        .Prefetch(4)
                        .Build();
  absl::StatusOr<std::unique_ptr<exec::Pipeline>> pipeline = exec::Pipeline::Create(def);
  SLUICE_EXPECT_OK(pipeline.status());
  std::unique_ptr<exec::PipelineIterator> it = (*pipeline)->Iterate();
  std::vector<float> all;
  bool end = false;
  while (true) {
    Batch b;
    SLUICE_EXPECT_OK(it->Next(&b, &end));
    if (end) break;
    absl::StatusOr<std::vector<uint8_t>> bytes = HostBytes(b.columns[0].values);
    EXPECT_TRUE(bytes.ok()) << bytes.status();
    if (!bytes.ok()) break;
    const float* values = reinterpret_cast<const float*>(bytes->data());
    all.insert(all.end(), values, values + bytes->size() / sizeof(float));
  }
  return all;
}

TEST(CudaRuntime, TheNodesFeedingADeviceMapWritePageLockedMemory) {
  SKIP_WITHOUT_GPU();
  testing::TempDir dir;
  testing::WriteCifarTfRecords(dir.path(), 64, 2);
  PipelineDef def =
      PipelineBuilder::TfRecord({dir.path() + "/*.tfrecord"}, {BytesFeature("image", 3072), Int64Feature("label")})
          .Map({Op("decode_raw", {{"dtype", "uint8"}}), Op("reshape", {{"shape", {32, 32, 3}}})})
          .Batch(16)
          .Map({Op("rescale", {{"scale", 0.5}})}, 0, "cuda")
          .Build();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<exec::Pipeline> pipeline, exec::Pipeline::Create(def));
  std::unique_ptr<exec::PipelineIterator> it = pipeline->Iterate();
  Batch b;
  bool end = false;
  SLUICE_ASSERT_OK(it->Next(&b, &end));
  EXPECT_EQ(b.columns[0].values.memory_kind(), MemoryKind::kDevice);
  // The label passes through from the source, which wrote the chunk the
  // map copied (through views and a batch that passed it on): in
  // page-locked memory, so the copy did not stage it.
  EXPECT_EQ(b.columns[1].values.memory_kind(), MemoryKind::kPinnedHost);
}

TEST(CudaRuntime, BatchesHandedOnBeforeTheGpuIsDoneAreRightOnceReady) {
  SKIP_WITHOUT_GPU();
  const std::vector<float> got = RunRescale();
  ASSERT_EQ(got.size(), 64u * 9 * 11 * 3);
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i], 0.5f * static_cast<float>((i * 131 + 7) % 251)) << "value " << i;
  }
}

}  // namespace
}  // namespace sluice::ops
