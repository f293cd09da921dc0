#include "sluice/ops/cuda/nvjpeg_decoder.h"

#include <cstdlib>
#include <map>

#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/ops/cuda/cuda_runtime.h"

namespace sluice::ops::cuda {
namespace {

const char* StatusName(nvjpegStatus_t status) {
  switch (status) {
    case NVJPEG_STATUS_SUCCESS:
      return "NVJPEG_STATUS_SUCCESS";
    case NVJPEG_STATUS_NOT_INITIALIZED:
      return "NVJPEG_STATUS_NOT_INITIALIZED";
    case NVJPEG_STATUS_INVALID_PARAMETER:
      return "NVJPEG_STATUS_INVALID_PARAMETER";
    case NVJPEG_STATUS_BAD_JPEG:
      return "NVJPEG_STATUS_BAD_JPEG";
    case NVJPEG_STATUS_JPEG_NOT_SUPPORTED:
      return "NVJPEG_STATUS_JPEG_NOT_SUPPORTED";
    case NVJPEG_STATUS_ALLOCATOR_FAILURE:
      return "NVJPEG_STATUS_ALLOCATOR_FAILURE";
    case NVJPEG_STATUS_EXECUTION_FAILED:
      return "NVJPEG_STATUS_EXECUTION_FAILED";
    case NVJPEG_STATUS_ARCH_MISMATCH:
      return "NVJPEG_STATUS_ARCH_MISMATCH";
    case NVJPEG_STATUS_INTERNAL_ERROR:
      return "NVJPEG_STATUS_INTERNAL_ERROR";
    case NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED:
      return "NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED";
    case NVJPEG_STATUS_INCOMPLETE_BITSTREAM:
      return "NVJPEG_STATUS_INCOMPLETE_BITSTREAM";
  }
  return "an unknown nvJPEG status";
}

bool HardwareAllowed() {
  const char* env = std::getenv("SLUICE_NVJPEG_HARDWARE");
  return env == nullptr || std::string(env) != "0";
}

}  // namespace

absl::Status NvjpegStatus(nvjpegStatus_t status, const char* what) {
  if (status == NVJPEG_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("nvJPEG: ", what, ": ", StatusName(status)));
}

// What one Decode uses, its own until the work it queued is done: a
// batched decoding state per handle, one for single decodes (nvJPEG's
// states are not shared between batched and single decoding), the parser
// of the hardware's check, and the event recorded after its work.
struct NvjpegDecoder::State {
  nvjpegJpegState_t hardware = nullptr, cuda = nullptr, single = nullptr;
  int hardware_batch = 0, cuda_batch = 0;  // the batch size each is initialized for; 0: none
  nvjpegJpegStream_t parsed = nullptr;
  cudaEvent_t done = nullptr;
  std::vector<const unsigned char*> data;
  std::vector<size_t> sizes;
  std::vector<nvjpegImage_t> destinations;

  ~State() {
    if (parsed != nullptr) nvjpegJpegStreamDestroy(parsed);
    for (nvjpegJpegState_t s : {hardware, cuda, single}) {
      if (s != nullptr) nvjpegJpegStateDestroy(s);
    }
    if (done != nullptr) cudaEventDestroy(done);
  }
};

absl::StatusOr<NvjpegDecoder*> NvjpegDecoder::ForDevice(int device) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* decoders = new std::map<int, std::unique_ptr<NvjpegDecoder>>();
  absl::MutexLock lock(&mu);
  auto it = decoders->find(device);
  if (it != decoders->end()) return it->second.get();
  std::unique_ptr<NvjpegDecoder> decoder(new NvjpegDecoder());
  SLUICE_RETURN_IF_ERROR(decoder->Init(device));
  return decoders->emplace(device, std::move(decoder)).first->second.get();
}

absl::Status NvjpegDecoder::Init(int device) {
  device_ = device;
  SLUICE_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device), "cudaSetDevice"));
  SLUICE_RETURN_IF_ERROR(
      NvjpegStatus(nvjpegCreateEx(NVJPEG_BACKEND_DEFAULT, nullptr, nullptr, NVJPEG_FLAGS_DEFAULT, &cuda_),
                   "creating the CUDA decoder"));
  // Fails on a GPU without JPEG engines: the CUDA decoder then takes all.
  if (HardwareAllowed() && nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE, nullptr, nullptr, NVJPEG_FLAGS_DEFAULT,
                                          &hardware_) != NVJPEG_STATUS_SUCCESS) {
    hardware_ = nullptr;
  }
  unsigned engines = 0, cores = 0;
  if (hardware_ != nullptr && nvjpegGetHardwareDecoderInfo(hardware_, &engines, &cores) == NVJPEG_STATUS_SUCCESS) {
    description_ = absl::StrCat("hardware JPEG decoder (", engines, " engines x ", cores, " cores) + CUDA");
  } else if (hardware_ != nullptr) {
    description_ = "hardware JPEG decoder + CUDA";
  } else {
    description_ = HardwareAllowed() ? "CUDA (this GPU has no hardware JPEG decoder)"
                                     : "CUDA (hardware decoder off: SLUICE_NVJPEG_HARDWARE=0)";
  }
  return absl::OkStatus();
}

NvjpegDecoder::~NvjpegDecoder() {
  free_.clear();
  if (hardware_ != nullptr) nvjpegDestroy(hardware_);
  if (cuda_ != nullptr) nvjpegDestroy(cuda_);
}

std::unique_ptr<NvjpegDecoder::State> NvjpegDecoder::Borrow() {
  std::unique_ptr<State> state;
  {
    absl::MutexLock lock(&mu_);
    if (!free_.empty()) {
      state = std::move(free_.back());
      free_.pop_back();
    }
  }
  if (state != nullptr) {
    // Its buffers may still be read by the work its last Decode queued
    // (on another thread's stream, perhaps).
    cudaEventSynchronize(state->done);
    return state;
  }
  state = std::make_unique<State>();
  // What fails to be made stays null: its images go elsewhere (CUDA, CPU).
  nvjpegJpegStateCreate(cuda_, &state->cuda);
  nvjpegJpegStateCreate(cuda_, &state->single);
  if (hardware_ != nullptr) {
    nvjpegJpegStateCreate(hardware_, &state->hardware);
    nvjpegJpegStreamCreate(hardware_, &state->parsed);
  }
  cudaEventCreateWithFlags(&state->done, cudaEventDisableTiming);
  return state;
}

void NvjpegDecoder::Return(std::unique_ptr<State> state, cudaStream_t stream) {
  if (state->done != nullptr) cudaEventRecord(state->done, stream);
  absl::MutexLock lock(&mu_);
  free_.push_back(std::move(state));
}

absl::Status NvjpegDecoder::Decode(absl::Span<const Image> images, cudaStream_t stream, std::vector<Path>* paths) {
  paths->assign(images.size(), Path::kNone);
  SLUICE_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device_), "cudaSetDevice"));
  std::unique_ptr<State> state = Borrow();
  std::vector<int> on_hardware, on_cuda;
  for (size_t i = 0; i < images.size(); ++i) {
    const Image& image = images[i];
    int components = 0;
    nvjpegChromaSubsampling_t subsampling;
    int widths[NVJPEG_MAX_COMPONENT], heights[NVJPEG_MAX_COMPONENT];
    // nvJPEG decodes one or three components (not CMYK or YCCK), and must
    // see the size the caller allotted for.
    if (nvjpegGetImageInfo(cuda_, image.data, image.size, &components, &subsampling, widths, heights) !=
            NVJPEG_STATUS_SUCCESS ||
        (components != 1 && components != 3) || widths[0] != image.width || heights[0] != image.height) {
      continue;
    }
    int unsupported = 1;  // 0 means supported
    // The whole stream is parsed: a file corrupt past its header would
    // fail the hardware's batch as a whole.
    if (state->hardware != nullptr && state->parsed != nullptr &&
        nvjpegJpegStreamParse(hardware_, image.data, image.size, 0, 0, state->parsed) == NVJPEG_STATUS_SUCCESS &&
        nvjpegDecodeBatchedSupported(hardware_, state->parsed, &unsupported) == NVJPEG_STATUS_SUCCESS &&
        unsupported == 0) {
      on_hardware.push_back(static_cast<int>(i));
    } else if (state->cuda != nullptr) {
      on_cuda.push_back(static_cast<int>(i));
    }
  }
  if (!on_hardware.empty()) {
    // The hardware decoder writes its outputs when called, not in the
    // stream's order: the work queued before (which may still read memory
    // the pool has handed out again) must be done first.
    if (absl::Status s = CudaStatus(cudaStreamSynchronize(stream), "waiting for the stream"); !s.ok()) {
      Return(std::move(state), stream);
      return s;
    }
    DecodeGroup(hardware_, state->hardware, &state->hardware_batch, images, on_hardware, Path::kHardware, state.get(),
                stream, paths);
  }
  if (!on_cuda.empty()) {
    DecodeGroup(cuda_, state->cuda, &state->cuda_batch, images, on_cuda, Path::kCuda, state.get(), stream, paths);
  }
  Return(std::move(state), stream);
  return absl::OkStatus();
}

void NvjpegDecoder::DecodeGroup(nvjpegHandle_t handle, nvjpegJpegState_t batch_state, int* batch_size,
                                absl::Span<const Image> images, const std::vector<int>& indices, Path path,
                                State* state, cudaStream_t stream, std::vector<Path>* paths) {
  state->data.clear();
  state->sizes.clear();
  state->destinations.clear();
  for (const int i : indices) {
    const Image& image = images[i];
    state->data.push_back(image.data);
    state->sizes.push_back(image.size);
    nvjpegImage_t destination = {};
    destination.channel[0] = image.rgb;
    destination.pitch[0] = static_cast<size_t>(image.width) * 3;
    state->destinations.push_back(destination);
  }
  const int n = static_cast<int>(indices.size());
  // Initializing is needed only when the batch size changes, and after a
  // failed batch.
  bool ok = *batch_size == n ||
            nvjpegDecodeBatchedInitialize(handle, batch_state, n, 1, NVJPEG_OUTPUT_RGBI) == NVJPEG_STATUS_SUCCESS;
  ok = ok && nvjpegDecodeBatched(handle, batch_state, state->data.data(), state->sizes.data(),
                                 state->destinations.data(), stream) == NVJPEG_STATUS_SUCCESS;
  *batch_size = ok ? n : 0;
  if (ok) {
    for (const int i : indices) (*paths)[i] = path;
    return;
  }
  // One image spoiled the batch: decode them one by one with the CUDA
  // decoder, which takes everything nvJPEG can decode; what fails stays kNone.
  for (size_t k = 0; k < indices.size(); ++k) {
    if (state->single != nullptr &&
        nvjpegDecode(cuda_, state->single, state->data[k], state->sizes[k], NVJPEG_OUTPUT_RGBI, &state->destinations[k],
                     stream) == NVJPEG_STATUS_SUCCESS) {
      (*paths)[indices[k]] = Path::kCuda;
    }
  }
}

}  // namespace sluice::ops::cuda
