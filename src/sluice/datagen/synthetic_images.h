// Synthetic photographs for W3: smooth gradients, soft-edged shapes, fine
// texture and a little noise, so JPEG compresses them as it does photos
// (pure noise would not), encoded as JPEG (baseline or progressive, RGB,
// grayscale or CMYK) or PNG, in the ImageFolder layout.
#ifndef SLUICE_DATAGEN_SYNTHETIC_IMAGES_H_
#define SLUICE_DATAGEN_SYNTHETIC_IMAGES_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sluice::datagen {

struct Image {
  int width = 0, height = 0, channels = 3;  // 1 gray, 3 RGB, 4 CMYK
  std::vector<uint8_t> pixels;              // rows of width * channels
};

// A photo-like RGB image; the same seed gives the same image.
Image PhotoLikeImage(int width, int height, uint64_t seed);
// The image as grayscale (luma) or as CMYK (plain, not inverted).
Image ToGray(const Image& rgb);
Image ToCmyk(const Image& rgb);

// JPEG of `image` (1, 3 or 4 channels) at `quality`; progressive on request.
absl::StatusOr<std::string> EncodeJpeg(const Image& image, int quality, bool progressive);
absl::StatusOr<std::string> EncodePng(const Image& image);

// Image `index` of a synthetic set: about 500x375 (some 375x500), JPEG
// quality 90; one in 25 grayscale, one in 10 progressive, one in 50 a PNG.
struct SyntheticImageFile {
  int label = 0;      // index % classes
  std::string bytes;  // the encoded file
  std::string ext;    // "jpg", "JPEG" (extensions in any case) or "png"
};
absl::StatusOr<SyntheticImageFile> MakeSyntheticImageFile(int64_t index, int classes, uint64_t seed);
// Its extension, and its path in the folder layout: class_LLL/img_IIIIIII.EXT.
std::string SyntheticImageExt(int64_t index);
std::string SyntheticImageName(int64_t index, int classes);

// `count` images in `classes` class folders under `dir`; refused where an
// earlier run left images this one would not replace (older_files.h).
// `progress(done, total)`.
absl::Status WriteSyntheticImageFolder(const std::string& dir, int64_t count, int classes, uint64_t seed,
                                       const std::function<void(int64_t, int64_t)>& progress);

// The same images as TFRecord shards DIR/train-0000i-of-0000n.tfrecord of
// tf.train.Example in the usual ImageNet layout: "image/encoded" (the
// file's bytes), "image/format" ("jpeg" or "png"), "image/class/label".
absl::Status WriteSyntheticImageTfRecords(const std::string& dir, int64_t count, int classes, int files, uint64_t seed,
                                          const std::function<void(int64_t, int64_t)>& progress);

}  // namespace sluice::datagen

#endif  // SLUICE_DATAGEN_SYNTHETIC_IMAGES_H_
