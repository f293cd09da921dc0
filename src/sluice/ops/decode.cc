// Image decoding ops: encoded JPEG, PNG, WebP or netpbm bytes (a ragged column,
// as image sources and bytes features yield them) to fixed-size uint8 RGB images,
// with the crop and resize that fix the size fused into the decode, so the
// decoder only produces the pixels the output needs.
#include <cmath>
#include <optional>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/kernels/exif_orientation.h"
#include "sluice/kernels/image_decoder.h"
#include "sluice/kernels/resample.h"
#include "sluice/ops/builtin_ops.h"
#include "sluice/ops/crop_window.h"
#include "sluice/ops/decode_params.h"
#include "sluice/ops/field.h"
#include "sluice/ops/normalize_params.h"
#include "sluice/ops/op_registry.h"

namespace sluice::ops {
namespace {

using kernels::DctScaleFor;
using kernels::DecodedRegion;
using kernels::DecodeRegion;
using kernels::ImageInfo;
using kernels::ReadImageInfo;
using kernels::ResampleBilinear;
using kernels::ResampleBilinearPlanes;
using kernels::Window;

thread_local DecodedRegion tls_region;

// Decodes each image's window and resamples it to the output size, either
// as uint8 RGB or, fused, straight through crop_mirror_normalize's
// arithmetic into its output.
class DecodeKernel : public Kernel {
 public:
  using Params = DecodeParams;
  explicit DecodeKernel(const Params& p) : p_(p) {}
  explicit DecodeKernel(const FusedDecodeNormalizeParams& p) : p_(p.decode) {
    normalize_.emplace(p.normalizer);
    normalize_key_ = p.normalize_key;
  }

  absl::Status Run(const KernelContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    for (int64_t r = 0; r < ctx.rows; ++r) {
      const absl::string_view bytes = in[0].bytes(r);
      absl::Status s = DecodeOne(bytes, ctx, r, out[0].row<uint8_t>(r));
      if (!s.ok()) return WithContext(s, ctx.Where(r));
    }
    return absl::OkStatus();
  }

 private:
  absl::Status DecodeOne(absl::string_view bytes, const KernelContext& ctx, int64_t r, uint8_t* dst) const {
    SLUICE_ASSIGN_OR_RETURN(ImageInfo info, ReadDecodableInfo(bytes, p_.max_pixels));
    if (const int orientation = p_.adjust_orientation ? kernels::ExifOrientation(bytes) : 1; orientation != 1) {
      return DecodeTurned(bytes, info, orientation, ctx, r, dst);
    }
    const Window window = PickWindow(p_.window, info.width, info.height, ctx, r);
    const int denom = p_.dct_scaling ? DctScaleFor(info, window, p_.out_w, p_.out_h) : 1;
    DecodedRegion& region = tls_region;
    SLUICE_RETURN_IF_ERROR(DecodeRegion(bytes, info, window, denom, p_.out_w, p_.out_h, &region));
    if (!normalize_) {
      ResampleBilinear(region.pixels.data(), region.width, region.height, 3, int64_t{region.width} * 3, region.window,
                       dst, p_.out_w, p_.out_h);
      return absl::OkStatus();
    }
    const bool mirror = normalize_->Mirror(ctx, r, normalize_key_);
    ResampleBilinearPlanes(region.pixels.data(), region.width, region.height, 3, int64_t{region.width} * 3,
                           region.window, p_.out_w, p_.out_h,
                           [&](int y, const int16_t* levels, int64_t channel_stride) {
                             normalize_->Planes(levels, channel_stride, y, mirror, dst);
                           });
    return absl::OkStatus();
  }

  // A photo whose EXIF orientation is not as stored: its window is picked
  // on the upright image and decoded from the stored pixels it covers,
  // resampled as stored and turned upright (resampling commutes with the
  // turn: the filter is the same along each axis).
  absl::Status DecodeTurned(absl::string_view bytes, const ImageInfo& info, int orientation, const KernelContext& ctx,
                            int64_t r, uint8_t* dst) const {
    const bool turned = kernels::Transposes(orientation);
    const Window upright =
        PickWindow(p_.window, turned ? info.height : info.width, turned ? info.width : info.height, ctx, r);
    const Window window = kernels::StoredWindow(upright, orientation, info.width, info.height);
    const int out_w = turned ? p_.out_h : p_.out_w, out_h = turned ? p_.out_w : p_.out_h;
    const int denom = p_.dct_scaling ? DctScaleFor(info, window, out_w, out_h) : 1;
    DecodedRegion& region = tls_region;
    SLUICE_RETURN_IF_ERROR(DecodeRegion(bytes, info, window, denom, out_w, out_h, &region));
    thread_local std::vector<uint8_t> stored, turned_pixels;
    const size_t bytes_out = static_cast<size_t>(out_w) * out_h * 3;
    if (stored.size() < bytes_out) stored.resize(bytes_out);
    ResampleBilinear(region.pixels.data(), region.width, region.height, 3, int64_t{region.width} * 3, region.window,
                     stored.data(), out_w, out_h);
    if (!normalize_) {
      kernels::TurnUpright(stored.data(), out_w, out_h, 3, orientation, dst);
      return absl::OkStatus();
    }
    if (turned_pixels.size() < bytes_out) turned_pixels.resize(bytes_out);
    kernels::TurnUpright(stored.data(), out_w, out_h, 3, orientation, turned_pixels.data());
    normalize_->Rows(turned_pixels.data(), int64_t{p_.out_w} * 3, normalize_->Mirror(ctx, r, normalize_key_), dst);
    return absl::OkStatus();
  }

  const Params p_;
  std::optional<Normalizer> normalize_;
  uint64_t normalize_key_ = 0;
};

class FusedDecodeNormalizeKernel : public DecodeKernel {
 public:
  using Params = FusedDecodeNormalizeParams;
  explicit FusedDecodeNormalizeKernel(const Params& p) : DecodeKernel(p) {}
};

// The ragged bytes column named by attr "field".
absl::StatusOr<int> EncodedField(const Attrs& attrs, const Schema& schema) {
  const std::string& name = attrs.GetString("field");
  std::optional<int> column = schema.Find(name);
  if (!column) {
    return AttrError("field", absl::StrCat("names no column: '", name, "' (columns: ", schema.Names(), ")"));
  }
  const ColumnSpec& spec = schema.column(*column);
  if (!spec.ragged || spec.dtype != DType::kUInt8) {
    return AttrError("field", absl::StrCat("column '", name, "' is ", spec.ToString(),
                                           "; decoding takes encoded image bytes (an image source's \"image\", "
                                           "or a bytes feature of length 0)"));
  }
  return *column;
}

absl::StatusOr<InferredOp> InferDecode(const Attrs& attrs, const Schema& schema, int h, int w, CropSpec window) {
  SLUICE_ASSIGN_OR_RETURN(int column, EncodedField(attrs, schema));
  ColumnSpec out{schema.column(column).name, DType::kUInt8, Shape{int64_t{h}, int64_t{w}, 3}};
  InferredOp op = UnaryOp(column, out,
                          DecodeParams{h, w, attrs.GetBool("dct_scaling"), window, attrs.GetInt("max_pixels"),
                                       attrs.GetBool("adjust_orientation")});
  op.random = window.kind == CropSpec::Kind::kRandomResized;
  return op;
}

absl::StatusOr<InferredOp> InferDecodeImage(const Attrs& attrs, const Schema& schema) {
  const auto [h, w] = ImageSize(attrs, "size");
  return InferDecode(attrs, schema, h, w, CropSpec{});
}

absl::StatusOr<InferredOp> InferDecodeRandomResizedCrop(const Attrs& attrs, const Schema& schema) {
  SLUICE_ASSIGN_OR_RETURN(CropSpec window, RandomResizedCropSpec(attrs));
  const auto [h, w] = ImageSize(attrs, "size");
  return InferDecode(attrs, schema, h, w, window);
}

// torchvision's Resize(resize) (the shorter side to `resize`, the longer in
// proportion, truncated) then CenterCrop(crop), as one window.
absl::StatusOr<InferredOp> InferDecodeResizeCenterCrop(const Attrs& attrs, const Schema& schema) {
  CropSpec window;
  window.kind = CropSpec::Kind::kResizeCenter;
  window.resize = attrs.GetInt("resize");
  std::tie(window.crop_h, window.crop_w) = ImageSize(attrs, "crop");
  // The shorter side is `resize` after it, for a tall image the width: a
  // larger crop would reach past the image (torchvision pads it with zeros).
  if (window.crop_h > window.resize || window.crop_w > window.resize) {
    return AttrError("crop", absl::StrCat("[", window.crop_h, ", ", window.crop_w,
                                          "] is larger than the image's shorter "
                                          "side after the resize, ",
                                          window.resize, "; crop no more than `resize`"));
  }
  return InferDecode(attrs, schema, window.crop_h, window.crop_w, window);
}

AttrSchema EncodedFieldAttr() { return {"field", AttrType::kString, "\"image\"", "the column of encoded bytes"}; }

AttrSchema DctScalingAttr() {
  return {"dct_scaling", AttrType::kBool, "true",
          "JPEG: decode at 1/2, 1/4 or 1/8 size in the DCT when the output is that much smaller"};
}

AttrSchema AdjustOrientationAttr() {
  return {"adjust_orientation", AttrType::kBool, "false",
          "turn photos upright by their EXIF orientation (JPEG, PNG, WebP), as OpenCV's imread and DALI's decoders "
          "do; off: the pixels as stored, as torchvision's PIL loader reads them. The window is picked on the "
          "upright image. cpu only"};
}

AttrSchema MaxPixelsAttr() {
  return AttrSchema{"max_pixels", AttrType::kInt, "100000000",
                    "refuse an image whose header claims more pixels (width x height) than this, before "
                    "allocating for it"}
      .AtLeast(1);
}

// A decode op's schema: the field first, its own attrs, dct_scaling,
// max_pixels and adjust_orientation last.
OpSchema DecodeSchema(const char* name, std::string doc, std::vector<AttrSchema> own) {
  OpSchema op(name);
  op.Doc(std::move(doc)).Attr(EncodedFieldAttr());
  for (AttrSchema& a : own) op.Attr(std::move(a));
  op.Attr(DctScalingAttr())
      .Attr(MaxPixelsAttr())
      .Attr(AdjustOrientationAttr())
      .Input("field", "encoded JPEG, PNG, WebP or netpbm bytes (variable length)")
      .Output("field", "uint8 RGB [height,width,3]");
  return op;
}

}  // namespace

absl::StatusOr<ImageInfo> ReadDecodableInfo(absl::string_view bytes, int64_t max_pixels) {
  SLUICE_ASSIGN_OR_RETURN(ImageInfo info, ReadImageInfo(bytes));
  if (info.width <= 0 || info.height <= 0) return absl::DataLossError("image of zero size");
  // Checked before any pixel buffer grows: a header can claim gigabytes.
  if (int64_t{info.width} * info.height > max_pixels) {
    return absl::InvalidArgumentError(absl::StrCat("image of ", info.width, " x ", info.height,
                                                   " pixels is larger than max_pixels (", max_pixels, ")"));
  }
  return info;
}

bool IsDecodeOp(absl::string_view op) {
  return op == "decode_image" || op == "decode_random_resized_crop" || op == "decode_resize_center_crop";
}

absl::Status RegisterDecodeOps(OpRegistry* registry) {
  SLUICE_RETURN_IF_ERROR(registry->AddOp(
      DecodeSchema(
          "decode_image",
          "Decodes JPEG (libjpeg-turbo; grayscale, CMYK and progressive too), PNG (libpng), WebP (libwebp) "
          "or raw netpbm (PGM, PPM) bytes into a uint8 RGB image [H,W,3], resized to `size` with antialiased bilinear "
          "filtering (PIL's and torchvision's).",
          {ImageSizeAttr("size", "")})
          .Infer(InferDecodeImage)));
  SLUICE_RETURN_IF_ERROR(registry->AddOp(
      DecodeSchema("decode_random_resized_crop",
                   "Decodes a random crop of each image and resizes it to `size`: torchvision's RandomResizedCrop "
                   "(area `scale` of the image, aspect `ratio`, 10 tries, else a centred crop) fused into the decode, "
                   "which reads only the crop's rows and columns and shrinks in the DCT when the crop is 2x the "
                   "output or more.",
                   RandomResizedCropAttrs())
          .Random()
          .Infer(InferDecodeRandomResizedCrop)));
  SLUICE_RETURN_IF_ERROR(registry->AddOp(
      DecodeSchema(
          "decode_resize_center_crop",
          "Evaluation's transform fused into the decode: the shorter side resized to `resize` "
          "(torchvision's Resize(resize)), then the centre `crop` (CenterCrop), decoding only what the crop "
          "needs.",
          {AttrSchema{"resize", AttrType::kInt, "256", "the shorter side's length before the crop"}.Range(1, 65535),
           ImageSizeAttr("crop", "[224]")})
          .Infer(InferDecodeResizeCenterCrop)));
  for (const char* op : {"decode_image", "decode_random_resized_crop", "decode_resize_center_crop"}) {
    SLUICE_RETURN_IF_ERROR(registry->AddKernel<DecodeKernel>(op, Backend::kCpu));
  }
  SLUICE_RETURN_IF_ERROR(registry->AddOp(
      OpSchema(kFusedDecodeNormalizeOp)
          .Doc("A decode op and the uncropped crop_mirror_normalize after it as one kernel: resampled rows go "
               "straight into the normalized output (made by the graph; options.no_fuse_decode opts out).")
          .Input("field", "encoded JPEG, PNG, WebP or netpbm bytes")
          .Output("field", "crop_mirror_normalize's output")
          .Random()
          .Internal()));
  return registry->AddKernel<FusedDecodeNormalizeKernel>(kFusedDecodeNormalizeOp, Backend::kCpu);
}

}  // namespace sluice::ops
