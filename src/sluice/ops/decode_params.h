// What the decode ops' cpu and cuda kernels share (their params, the check
// of an image's header), and the op the graph makes of a decode op followed
// by crop_mirror_normalize (without a crop) on the same column: the
// resampler hands its rows straight to the normalization, so the decoded
// image is never written as bytes and read back. Outputs are identical to
// the two ops run apart.
#ifndef SLUICE_OPS_DECODE_PARAMS_H_
#define SLUICE_OPS_DECODE_PARAMS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sluice/kernels/image_decoder.h"
#include "sluice/ops/crop_window.h"
#include "sluice/ops/normalize_params.h"

namespace sluice::ops {

// The params of decode_image, decode_random_resized_crop and
// decode_resize_center_crop: the output size and how each image's window
// is picked.
struct DecodeParams {
  int out_h, out_w;
  bool dct_scaling;
  CropSpec window;
  int64_t max_pixels;               // larger images (by their header) are refused
  bool adjust_orientation = false;  // turned upright by their EXIF orientation
};

// The header of an image a decode op is to decode: DataLoss for bytes that
// are not an image or claim zero pixels, InvalidArgument for more than
// `max_pixels` (checked before anything is allocated for it).
absl::StatusOr<kernels::ImageInfo> ReadDecodableInfo(absl::string_view bytes, int64_t max_pixels);

// Whether `op` is one of the decode ops above.
bool IsDecodeOp(absl::string_view op);

// The internal op the graph makes of a decode op and the uncropped
// crop_mirror_normalize after it. It runs under the decode op's key (its
// windows' draws); the mirrors draw under `normalize_key`, the normalize
// op's.
inline constexpr char kFusedDecodeNormalizeOp[] = "fused_decode_normalize";
struct FusedDecodeNormalizeParams {
  DecodeParams decode;
  Normalizer normalizer;
  uint64_t normalize_key;
};

}  // namespace sluice::ops

#endif  // SLUICE_OPS_DECODE_PARAMS_H_
