// Ops on decoded uint8 images of a fixed size: resize, random_resized_crop
// and center_crop (crop_mirror_normalize is in normalize.cc).
#include <cstring>
#include <functional>

#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/ops/crop_window.h"
#include "sluice/ops/field.h"
#include "sluice/ops/normalize.h"
#include "sluice/ops/op_registry.h"
#include "sluice/ops/resample.h"

namespace sluice::ops {
namespace {

// A window of each image (all of it, or a random one), resampled to h x w.
class ResampleKernel : public Kernel {
 public:
  using WindowFn = std::function<Window(const TileContext&, int64_t row)>;

  ResampleKernel(ImageDims in, int64_t h, int64_t w, WindowFn window)
      : in_(in), h_(h), w_(w), window_(std::move(window)) {}

  absl::Status Run(const TileContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    for (int64_t r = 0; r < ctx.rows; ++r) {
      ResampleBilinear(in[0].row<uint8_t>(r), static_cast<int>(in_.w), static_cast<int>(in_.h),
                       static_cast<int>(in_.c), in_.row_elems(), window_(ctx, r), out[0].row<uint8_t>(r),
                       static_cast<int>(w_), static_cast<int>(h_));
    }
    return absl::OkStatus();
  }

 private:
  const ImageDims in_;
  const int64_t h_, w_;
  const WindowFn window_;
};

// The image column named by "field", resized to attr "size" by `window`.
absl::StatusOr<OpBinding> BindResample(const Attrs& attrs, const Schema& schema,
                                       std::function<ResampleKernel::WindowFn(const ImageDims&)> window) {
  BoundField f;
  SLUICE_ASSIGN_OR_RETURN(ImageDims d, BindUint8Image(attrs, schema, &f));
  SLUICE_ASSIGN_OR_RETURN(auto size, ImageSizeAttr(attrs, "size"));
  ColumnSpec out = f.spec;
  out.shape = Shape{size.first, size.second, d.c};
  return UnaryBinding(f.column, out, std::make_shared<ResampleKernel>(d, size.first, size.second, window(d)));
}

absl::StatusOr<OpBinding> BindResize(const Attrs& attrs, const Schema& schema) {
  return BindResample(attrs, schema, [](const ImageDims& d) {
    const Window whole{0, 0, static_cast<double>(d.w), static_cast<double>(d.h)};
    return [whole](const TileContext&, int64_t) { return whole; };
  });
}

// RandomResizedCrop's window per image.
absl::StatusOr<OpBinding> BindRandomResizedCrop(const Attrs& attrs, const Schema& schema) {
  const std::vector<double>& scale = attrs.GetFloats("scale");
  const std::vector<double>& ratio = attrs.GetFloats("ratio");
  SLUICE_RETURN_IF_ERROR(CheckRandomResizedCropRanges(scale, ratio));
  SLUICE_ASSIGN_OR_RETURN(
      OpBinding b, BindResample(attrs, schema, [s0 = scale[0], s1 = scale[1], r0 = ratio[0], r1 = ratio[1]](
                                                   const ImageDims& d) {
        return [d, s0, s1, r0, r1](const TileContext& ctx, int64_t row) {
          SampleRng rng = ctx.Rng(row);
          return RandomResizedCropWindow(static_cast<int>(d.w), static_cast<int>(d.h), rng, s0, s1, r0, r1);
        };
      }));
  b.random = true;
  return b;
}

class CenterCropKernel : public Kernel {
 public:
  CenterCropKernel(ImageDims in, int64_t h, int64_t w) : in_(in), h_(h), w_(w) {}
  absl::Status Run(const TileContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    const auto [top, left] = CenterOffsets(in_, h_, w_);
    const int64_t row_bytes = w_ * in_.c;
    for (int64_t r = 0; r < ctx.rows; ++r) {
      const uint8_t* src = in[0].row<uint8_t>(r) + (top * in_.w + left) * in_.c;
      uint8_t* dst = out[0].row<uint8_t>(r);
      for (int64_t y = 0; y < h_; ++y) std::memcpy(dst + y * row_bytes, src + y * in_.row_elems(), row_bytes);
    }
    return absl::OkStatus();
  }

 private:
  const ImageDims in_;
  const int64_t h_, w_;
};

absl::StatusOr<OpBinding> BindCenterCrop(const Attrs& attrs, const Schema& schema) {
  BoundField f;
  SLUICE_ASSIGN_OR_RETURN(ImageDims d, BindUint8Image(attrs, schema, &f));
  SLUICE_ASSIGN_OR_RETURN(auto size, ImageSizeAttr(attrs, "size"));
  if (size.first > d.h || size.second > d.w) {
    return AttrError("size", absl::StrCat("[", size.first, ", ", size.second, "] is larger than the image, ",
                                          f.spec.shape.ToString()));
  }
  ColumnSpec out = f.spec;
  out.shape = Shape{size.first, size.second, d.c};
  return UnaryBinding(f.column, out, std::make_shared<CenterCropKernel>(d, size.first, size.second));
}

}  // namespace

void RegisterImageCropOps(OpRegistry* registry) {
  registry->Register(OpSchema{
      "resize",
      "Resizes uint8 images [H,W,C] to `size` with bilinear filtering, antialiased when shrinking (PIL's and "
      "torchvision's).",
      {FieldAttr(), {"size", AttrType::kInts, "", "[height, width] or [size] of the output"}},
      false,
      false,
      BindResize});
  registry->Register(OpSchema{
      "random_resized_crop",
      "A random crop of each decoded uint8 image [H,W,C], resized to `size`: torchvision's RandomResizedCrop "
      "(decode_random_resized_crop does the same inside the decoder, faster).",
      [] {
        std::vector<AttrSchema> attrs = RandomResizedCropAttrs();
        attrs.insert(attrs.begin(), FieldAttr());
        return attrs;
      }(),
      true,
      false,
      BindRandomResizedCrop});
  registry->Register(OpSchema{
      "center_crop",
      "The centre `size` of uint8 images [H,W,C] (torchvision's CenterCrop).",
      {FieldAttr(), {"size", AttrType::kInts, "", "[height, width] or [size] of the output"}},
      false,
      false,
      BindCenterCrop});
  registry->Register(OpSchema{
      "crop_mirror_normalize",
      "The last step before a model, fused: an optional centre crop, a mirror with probability `mirror`, "
      "normalization (in * scale - mean) / std per channel, and HWC uint8 to CHW float32 or float16; "
      "dtype uint8 skips the normalization (do it on the GPU: a quarter of the bytes across PCIe).",
      {FieldAttr(),
       {"crop", AttrType::kInts, "[]", "[height, width] of a centre crop; empty: none"},
       {"mirror", AttrType::kFloat, "0.5", "probability of a horizontal mirror (0: never, 1: always)"},
       {"mean", AttrType::kFloats, "[0.485, 0.456, 0.406]", "per channel, after scaling (ImageNet's)"},
       {"std", AttrType::kFloats, "[0.229, 0.224, 0.225]", "per channel (ImageNet's)"},
       {"scale", AttrType::kFloat, "0.00392156862745098", "applied first (1/255: torchvision's ToTensor)"},
       {"dtype", AttrType::kString, "\"float32\"", "float32, float16 or uint8"},
       {"layout", AttrType::kString, "\"CHW\"", "CHW (PyTorch's) or HWC"}},
      true,
      false,
      BindCropMirrorNormalize});
}

}  // namespace sluice::ops
