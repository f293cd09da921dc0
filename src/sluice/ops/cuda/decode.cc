// The cuda kernels of decode_image, decode_random_resized_crop and
// decode_resize_center_crop: JPEG bytes on the host, RGB images of the
// output size in device memory. Each image's window is drawn on the host
// by the cpu kernel's own code (the same windows for the same seed); the
// images are decoded whole on the GPU by nvJPEG, a batch at a time (up to
// kGroupBytes of decoded pixels), and each window resampled to the output
// size by the cuda resampler. Images
// nvJPEG does not decode (PNG, netpbm, CMYK, files it fails on) are decoded
// on the CPU, only the window's part, and copied into place in the same
// run. The decoder never scales in the DCT (nvJPEG has no such decode for
// a batch): outputs are the cpu kernel's with dct_scaling off, within the
// IDCTs' differences.
#include <vector>

#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/ops/builtin_ops.h"
#include "sluice/ops/crop_window.h"
#include "sluice/ops/cuda/cuda_runtime.h"
#include "sluice/ops/cuda/device_scratch.h"
#include "sluice/ops/cuda/nvjpeg_decoder.h"
#include "sluice/ops/cuda/resample_run.h"
#include "sluice/ops/decode_params.h"
#include "sluice/ops/device_decode_stats.h"
#include "sluice/ops/op_registry.h"

namespace sluice::ops::cuda {
namespace {

using kernels::DecodedRegion;
using kernels::DecodeRegion;
using kernels::ImageInfo;
using kernels::Window;

// Decoded images start at this alignment in a group's pixel memory.
constexpr int64_t kImageAlign = 256;
// A run decodes its images in groups of at most this many bytes of
// decoded pixels (a batch of large photos could claim gigabytes at once).
constexpr int64_t kGroupBytes = int64_t{1} << 30;

int64_t AlignedBytes(const ImageInfo& info) {
  return (int64_t{info.width} * info.height * 3 + kImageAlign - 1) / kImageAlign * kImageAlign;
}

// One run's images on the host: their headers and windows, and for the
// group being decoded, their places and the JPEGs handed to nvJPEG.
struct Plan {
  std::vector<ImageInfo> infos;
  std::vector<Window> windows;
  std::vector<int64_t> offsets;  // bytes into the group's pixel memory
  std::vector<NvjpegDecoder::Image> jpegs;
  std::vector<int64_t> jpeg_rows;  // the row of each of jpegs
  std::vector<NvjpegDecoder::Path> paths;
  std::vector<bool> on_device;  // per row of the group: decoded by nvJPEG
  DecodedRegion region;         // a CPU decode's pixels
};

class DecodeCudaKernel : public Kernel {
 public:
  using Params = DecodeParams;
  explicit DecodeCudaKernel(const Params& p) : p_(p) {}

  absl::Status Setup(const SetupContext& ctx) override {
    SLUICE_ASSIGN_OR_RETURN(decoder_, NvjpegDecoder::ForDevice(ctx.device));
    SetDeviceDecoder(decoder_->description());
    return absl::OkStatus();
  }

  absl::Status Run(const KernelContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    if (p_.adjust_orientation) {
      return absl::InvalidArgumentError(
          "adjust_orientation turns images upright on the cpu only: decode on device \"cpu\", or store the images "
          "upright");
    }
    thread_local Plan plan;
    plan.infos.clear();
    plan.windows.clear();
    for (int64_t r = 0; r < ctx.rows; ++r) {
      absl::StatusOr<ImageInfo> info = ReadDecodableInfo(in[0].bytes(r), p_.max_pixels);
      if (!info.ok()) return WithContext(info.status(), ctx.Where(r));
      plan.infos.push_back(*info);
      plan.windows.push_back(PickWindow(p_.window, info->width, info->height, ctx, r));
    }
    for (int64_t begin = 0; begin < ctx.rows;) {
      int64_t end = begin + 1, bytes = AlignedBytes(plan.infos[begin]);
      for (; end < ctx.rows && bytes + AlignedBytes(plan.infos[end]) <= kGroupBytes; ++end) {
        bytes += AlignedBytes(plan.infos[end]);
      }
      SLUICE_RETURN_IF_ERROR(DecodeGroup(ctx, in[0], begin, end, bytes, out[0], &plan));
      begin = end;
    }
    return absl::OkStatus();
  }

 private:
  // Rows [begin, end), whose decoded pixels take `bytes`, into their rows
  // of `out`.
  absl::Status DecodeGroup(const KernelContext& ctx, const ColumnRef& in, int64_t begin, int64_t end, int64_t bytes,
                           const ColumnRef& out, Plan* plan) const {
    const cudaStream_t stream = Stream(ctx);
    SLUICE_ASSIGN_OR_RETURN(DeviceScratch pixels, DeviceScratch::Allocate(static_cast<size_t>(bytes), stream));
    plan->offsets.clear();
    plan->jpegs.clear();
    plan->jpeg_rows.clear();
    int64_t at = 0;
    for (int64_t r = begin; r < end; ++r) {
      const ImageInfo& info = plan->infos[r];
      plan->offsets.push_back(at);
      if (info.jpeg) {
        const absl::string_view encoded = in.bytes(r);
        plan->jpegs.push_back({reinterpret_cast<const uint8_t*>(encoded.data()), encoded.size(),
                               pixels.as<uint8_t>() + at, info.width, info.height});
        plan->jpeg_rows.push_back(r);
      }
      at += AlignedBytes(info);
    }
    SLUICE_RETURN_IF_ERROR(decoder_->Decode(plan->jpegs, stream, &plan->paths));
    plan->on_device.assign(static_cast<size_t>(end - begin), false);
    int64_t hardware = 0, cuda = 0;
    for (size_t k = 0; k < plan->jpegs.size(); ++k) {
      if (plan->paths[k] == NvjpegDecoder::Path::kNone) continue;
      plan->on_device[plan->jpeg_rows[k] - begin] = true;
      ++(plan->paths[k] == NvjpegDecoder::Path::kHardware ? hardware : cuda);
    }
    thread_local ResampleRun run;
    run.Clear(3, p_.out_w, p_.out_h);
    for (int64_t r = begin; r < end; ++r) {
      const ImageInfo& info = plan->infos[r];
      const int64_t offset = plan->offsets[r - begin];
      if (plan->on_device[r - begin]) {
        run.Add(offset, int64_t{info.width} * 3, info.width, info.height, plan->windows[r]);
        continue;
      }
      // Only the window's part, as the cpu kernel decodes it (unscaled).
      DecodedRegion& region = plan->region;
      absl::Status s = DecodeRegion(in.bytes(r), info, plan->windows[r], 1, p_.out_w, p_.out_h, &region);
      if (!s.ok()) return WithContext(s, ctx.Where(r));
      // From pageable memory: staged before the call returns, so the
      // region's buffer may be reused at once.
      SLUICE_RETURN_IF_ERROR(CudaStatus(
          cudaMemcpyAsync(pixels.as<uint8_t>() + offset, region.pixels.data(),
                          static_cast<size_t>(region.width) * region.height * 3, cudaMemcpyHostToDevice, stream),
          "copying a CPU-decoded image to the device"));
      run.Add(offset, int64_t{region.width} * 3, region.width, region.height, region.window);
    }
    CountDeviceDecodes(hardware, cuda, end - begin - hardware - cuda);
    return run.Queue(pixels.as<uint8_t>(), out.data + begin * out.row_bytes, stream);
  }

  const Params p_;
  NvjpegDecoder* decoder_ = nullptr;
};

}  // namespace

absl::Status RegisterDecodeCudaKernels(OpRegistry* registry) {
  for (const char* op : {"decode_image", "decode_random_resized_crop", "decode_resize_center_crop"}) {
    SLUICE_RETURN_IF_ERROR(registry->AddKernel<DecodeCudaKernel>(op, Backend::kCuda));
  }
  return absl::OkStatus();
}

}  // namespace sluice::ops::cuda
