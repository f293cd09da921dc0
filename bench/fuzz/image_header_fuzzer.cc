// JPEG, PNG and WebP bytes that may be anything: the header reader, then (for
// images up to 4 MP) decoding the whole image and a window of it, scaled.
#include <cstdlib>

#include "absl/strings/string_view.h"
#include "fuzz_input.h"
#include "sluice/kernels/image_decoder.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto info = sluice::kernels::ReadImageInfo(bytes);
  if (!info.ok()) return 0;
  if (info->width <= 0 || info->height <= 0) std::abort();
  if (static_cast<int64_t>(info->width) * info->height > (int64_t{1} << 22)) return 0;
  sluice::kernels::DecodedRegion region;
  const sluice::kernels::Window whole = sluice::kernels::WholeImage(*info);
  if (sluice::kernels::DecodeRegion(bytes, *info, whole, 1, info->width, info->height, &region).ok()) {
    if (region.pixels.size() < static_cast<size_t>(region.width) * region.height * 3) std::abort();
  }
  const sluice::kernels::Window window{info->width / 4.0, info->height / 4.0, info->width / 2.0, info->height / 2.0};
  (void)sluice::kernels::DecodeRegion(bytes, *info, window, info->jpeg ? 2 : 1, 8, 8, &region);
  return 0;
}
