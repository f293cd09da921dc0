// Decoding JPEGs on the GPU with nvJPEG, a batch at a time: the GPU's
// hardware JPEG engines (A100, H100, ...) take the baseline files they
// support; nvJPEG's CUDA decoder (Huffman on the host, the rest on the
// GPU) takes the others. What neither decodes is left to the caller, which
// decodes it on the CPU.
#ifndef SLUICE_OPS_CUDA_NVJPEG_DECODER_H_
#define SLUICE_OPS_CUDA_NVJPEG_DECODER_H_

#include <cuda_runtime_api.h>
#include <nvjpeg.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"

namespace sluice::ops::cuda {

// Thread-safe: each Decode borrows a decoding state of its own.
class NvjpegDecoder {
 public:
  // The decoder of `device`, made on first use and kept for the process.
  // The hardware engines are used when the GPU has them, unless
  // SLUICE_NVJPEG_HARDWARE=0.
  static absl::StatusOr<NvjpegDecoder*> ForDevice(int device);
  ~NvjpegDecoder();

  // One JPEG to decode into `rgb`: device memory for height rows of
  // width * 3 bytes, interleaved RGB (grayscale files are expanded).
  struct Image {
    // Host memory (page-locked is read fastest), valid until the work
    // queued on the stream is done: the hardware decoder reads it by DMA.
    const uint8_t* data = nullptr;
    size_t size = 0;
    uint8_t* rgb = nullptr;
    int width = 0, height = 0;  // as the file's header says
  };
  enum class Path { kHardware, kCuda, kNone };
  // Queues on `stream` the decoding of every image. (*paths)[i] says what
  // decodes image i; kNone: nothing (a file nvJPEG does not take, such as
  // CMYK, or one it failed on), and its rgb is left for the caller.
  absl::Status Decode(absl::Span<const Image> images, cudaStream_t stream, std::vector<Path>* paths);

  // "hardware JPEG decoder (7 engines) + CUDA" or "CUDA (this GPU has no
  // hardware JPEG decoder)".
  const std::string& description() const { return description_; }

 private:
  struct State;
  NvjpegDecoder() = default;
  absl::Status Init(int device);
  // A state no work is using any more; back to the pool once the work
  // queued on `stream` is done.
  std::unique_ptr<State> Borrow();
  void Return(std::unique_ptr<State> state, cudaStream_t stream);
  // Decodes images[indices] with `handle` as one batch; on a batch-level
  // failure, one at a time. Sets the path of each image decoded.
  void DecodeGroup(nvjpegHandle_t handle, nvjpegJpegState_t batch_state, int* batch_size,
                   absl::Span<const Image> images, const std::vector<int>& indices, Path path, State* state,
                   cudaStream_t stream, std::vector<Path>* paths);

  int device_ = -1;
  nvjpegHandle_t hardware_ = nullptr;  // null without hardware engines
  nvjpegHandle_t cuda_ = nullptr;
  std::string description_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<State>> free_ ABSL_GUARDED_BY(mu_);
};

// "nvJPEG: <what>: NVJPEG_STATUS_BAD_JPEG" for a failed call.
absl::Status NvjpegStatus(nvjpegStatus_t status, const char* what);

}  // namespace sluice::ops::cuda

#endif  // SLUICE_OPS_CUDA_NVJPEG_DECODER_H_
