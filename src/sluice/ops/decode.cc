// Image decoding ops: encoded JPEG or PNG bytes (a ragged column, as image
// sources and bytes features yield them) to fixed-size uint8 RGB images,
// with the crop and resize that fix the size fused into the decode, so the
// decoder only produces the pixels the output needs.
#include <cmath>
#include <functional>
#include <optional>

#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/ops/crop_window.h"
#include "sluice/ops/decode_fusion.h"
#include "sluice/ops/field.h"
#include "sluice/ops/image_decoder.h"
#include "sluice/ops/normalize.h"
#include "sluice/ops/op_registry.h"
#include "sluice/ops/resample.h"

namespace sluice::ops {
namespace {

// How a kernel picks, for one image, the window that becomes its output.
using WindowFn = std::function<Window(const ImageInfo&, const TileContext&, int64_t row)>;

thread_local DecodedRegion tls_region;

class DecodeKernel : public Kernel {
 public:
  DecodeKernel(int out_h, int out_w, bool dct_scaling, WindowFn window)
      : out_h_(out_h), out_w_(out_w), dct_scaling_(dct_scaling), window_(std::move(window)) {}
  // `decode` writing through `normalize`, which draws its mirrors keyed by
  // `normalize_key`.
  DecodeKernel(const DecodeKernel& decode, const Normalizer& normalize, uint64_t normalize_key)
      : DecodeKernel(decode.out_h_, decode.out_w_, decode.dct_scaling_, decode.window_) {
    normalize_.emplace(normalize);
    normalize_key_ = normalize_key;
  }

  bool normalizes() const { return normalize_.has_value(); }

  absl::Status Run(const TileContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    for (int64_t r = 0; r < ctx.rows; ++r) {
      const absl::string_view bytes = in[0].bytes(r);
      absl::Status s = DecodeOne(bytes, ctx, r, out[0].row<uint8_t>(r));
      if (!s.ok()) return WithContext(s, ctx.Where(r));
    }
    return absl::OkStatus();
  }

 private:
  absl::Status DecodeOne(absl::string_view bytes, const TileContext& ctx, int64_t r, uint8_t* dst) const {
    SLUICE_ASSIGN_OR_RETURN(ImageInfo info, ReadImageInfo(bytes));
    if (info.width <= 0 || info.height <= 0) return absl::DataLossError("image of zero size");
    const Window window = window_(info, ctx, r);
    const int denom = dct_scaling_ ? DctScaleFor(info, window, out_w_, out_h_) : 1;
    DecodedRegion& region = tls_region;
    SLUICE_RETURN_IF_ERROR(DecodeRegion(bytes, info, window, denom, &region));
    if (!normalize_) {
      ResampleBilinear(region.pixels.data(), region.width, region.height, 3, int64_t{region.width} * 3,
                       region.window, dst, out_w_, out_h_);
      return absl::OkStatus();
    }
    const bool mirror = normalize_->Mirror(ctx, r, normalize_key_);
    ResampleBilinearPlanes(region.pixels.data(), region.width, region.height, 3, int64_t{region.width} * 3,
                           region.window, out_w_, out_h_, [&](int y, const int16_t* levels, int64_t channel_stride) {
                             normalize_->Planes(levels, channel_stride, y, mirror, dst);
                           });
    return absl::OkStatus();
  }

  const int out_h_, out_w_;
  const bool dct_scaling_;
  const WindowFn window_;
  std::optional<Normalizer> normalize_;
  uint64_t normalize_key_ = 0;
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

absl::StatusOr<OpBinding> DecodeBinding(const Attrs& attrs, const Schema& schema, int h, int w,
                                        WindowFn window) {
  SLUICE_ASSIGN_OR_RETURN(int column, EncodedField(attrs, schema));
  ColumnSpec out{schema.column(column).name, DType::kUInt8, Shape{int64_t{h}, int64_t{w}, 3}};
  return UnaryBinding(column, out,
                      std::make_shared<DecodeKernel>(h, w, attrs.GetBool("dct_scaling"), std::move(window)));
}

absl::StatusOr<OpBinding> BindDecodeImage(const Attrs& attrs, const Schema& schema) {
  SLUICE_ASSIGN_OR_RETURN(auto size, ImageSizeAttr(attrs, "size"));
  return DecodeBinding(attrs, schema, size.first, size.second,
                       [](const ImageInfo& info, const TileContext&, int64_t) { return WholeImage(info); });
}

absl::StatusOr<OpBinding> BindDecodeRandomResizedCrop(const Attrs& attrs, const Schema& schema) {
  SLUICE_ASSIGN_OR_RETURN(auto size, ImageSizeAttr(attrs, "size"));
  const std::vector<double>& scale = attrs.GetFloats("scale");
  const std::vector<double>& ratio = attrs.GetFloats("ratio");
  SLUICE_RETURN_IF_ERROR(CheckRandomResizedCropRanges(scale, ratio));
  SLUICE_ASSIGN_OR_RETURN(
      OpBinding b, DecodeBinding(attrs, schema, size.first, size.second,
                                 [s0 = scale[0], s1 = scale[1], r0 = ratio[0], r1 = ratio[1]](
                                     const ImageInfo& info, const TileContext& ctx, int64_t row) {
                                   SampleRng rng = ctx.Rng(row);
                                   return RandomResizedCropWindow(info.width, info.height, rng, s0, s1, r0, r1);
                                 }));
  b.random = true;
  return b;
}

// torchvision's Resize(resize) (the shorter side to `resize`, the longer in
// proportion, truncated) then CenterCrop(crop), as one window.
absl::StatusOr<OpBinding> BindDecodeResizeCenterCrop(const Attrs& attrs, const Schema& schema) {
  const int64_t resize = attrs.GetInt("resize");
  if (resize <= 0 || resize > 65535) return AttrError("resize", "must be in 1..65535");
  SLUICE_ASSIGN_OR_RETURN(auto crop, ImageSizeAttr(attrs, "crop"));
  return DecodeBinding(attrs, schema, crop.first, crop.second,
                       [resize, ch = crop.first, cw = crop.second](const ImageInfo& info, const TileContext&,
                                                                   int64_t) {
                         const bool wide = info.width >= info.height;
                         const double short_side = wide ? info.height : info.width;
                         const double long_side = wide ? info.width : info.height;
                         const double resized_long = std::floor(resize * long_side / short_side);
                         const double rw = wide ? resized_long : resize, rh = wide ? resize : resized_long;
                         const double top = CenterOffset(rh, ch), left = CenterOffset(rw, cw);
                         const double sx = info.width / rw, sy = info.height / rh;
                         return Window{left * sx, top * sy, cw * sx, ch * sy};
                       });
}

AttrSchema EncodedFieldAttr() { return {"field", AttrType::kString, "\"image\"", "the column of encoded bytes"}; }

// The attrs every decode op has around its own: the field first, dct_scaling last.
std::vector<AttrSchema> DecodeAttrs(std::vector<AttrSchema> own);

AttrSchema DctScalingAttr() {
  return {"dct_scaling", AttrType::kBool, "true",
          "JPEG: decode at 1/2, 1/4 or 1/8 size in the DCT when the output is that much smaller"};
}

std::vector<AttrSchema> DecodeAttrs(std::vector<AttrSchema> own) {
  own.insert(own.begin(), EncodedFieldAttr());
  own.push_back(DctScalingAttr());
  return own;
}

}  // namespace

std::shared_ptr<const Kernel> FuseDecodeNormalize(const Kernel& decode, const Kernel& normalize,
                                                  uint64_t normalize_key) {
  const auto* d = dynamic_cast<const DecodeKernel*>(&decode);
  const auto* n = dynamic_cast<const CropMirrorNormalizeKernel*>(&normalize);
  if (d == nullptr || n == nullptr || n->crops() || d->normalizes()) return nullptr;
  return std::make_shared<DecodeKernel>(*d, n->normalizer(), normalize_key);
}

void RegisterDecodeOps(OpRegistry* registry) {
  registry->Register(OpSchema{
      "decode_image",
      "Decodes JPEG (libjpeg-turbo; grayscale, CMYK and progressive too) or PNG (libpng) bytes into a uint8 "
      "RGB image [H,W,3], resized to `size` with antialiased bilinear filtering (PIL's and torchvision's).",
      DecodeAttrs({{"size", AttrType::kInts, "", "[height, width] of the output"}}),
      false,
      false,
      BindDecodeImage});
  registry->Register(OpSchema{
      "decode_random_resized_crop",
      "Decodes a random crop of each image and resizes it to `size`: torchvision's RandomResizedCrop (area "
      "`scale` of the image, aspect `ratio`, 10 tries, else a centred crop) fused into the decode, which reads "
      "only the crop's rows and columns and shrinks in the DCT when the crop is 2x the output or more.",
      DecodeAttrs(RandomResizedCropAttrs()),
      true,
      false,
      BindDecodeRandomResizedCrop});
  registry->Register(OpSchema{
      "decode_resize_center_crop",
      "Evaluation's transform fused into the decode: the shorter side resized to `resize` (torchvision's "
      "Resize(resize)), then the centre `crop` (CenterCrop), decoding only what the crop needs.",
      DecodeAttrs({{"resize", AttrType::kInt, "256", "the shorter side's length before the crop"},
                   {"crop", AttrType::kInts, "[224]", "[height, width] or [size] of the output"}}),
      false,
      false,
      BindDecodeResizeCenterCrop});
}

}  // namespace sluice::ops
