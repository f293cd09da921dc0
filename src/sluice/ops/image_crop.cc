// Ops on decoded uint8 images of a fixed size: resize, center_crop, and
// crop_mirror_normalize, the last step before a model (DALI's
// CropMirrorNormalize): HWC uint8 in, CHW float32 / float16 (normalized) or
// uint8 (normalized later on the GPU) out, with a random mirror, in one
// pass.
#include <cstring>

#if defined(__F16C__)
#include <immintrin.h>
#endif

#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/ops/crop_window.h"
#include "sluice/ops/field.h"
#include "sluice/ops/op_registry.h"
#include "sluice/ops/resample.h"

namespace sluice::ops {
namespace {

// IEEE half from float, rounding to nearest even (what numpy's astype does).
uint16_t HalfFromFloat(float f) {
#if defined(__F16C__)
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
#else
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000;
  const int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffff;
  if (((x >> 23) & 0xff) == 0xff) return static_cast<uint16_t>(sign | 0x7c00 | (mant ? 0x200 : 0));
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00);
  if (exp <= 0) {  // subnormal or zero
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000;
    const uint32_t shift = static_cast<uint32_t>(14 - exp);
    uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) ++half;  // a carry into the exponent is right
  return static_cast<uint16_t>(half);
#endif
}

absl::StatusOr<ImageDims> Uint8Image(const Attrs& attrs, const Schema& schema, BoundField* f) {
  SLUICE_ASSIGN_OR_RETURN(*f, BindField(attrs, schema, {DType::kUInt8}));
  if (f->spec.shape.rank() != 3) {
    return AttrError("field", absl::StrCat("column '", f->spec.name, "' is ", f->spec.shape.ToString(),
                                           "; this op takes an image [H,W,C]"));
  }
  return ImageDimsOf(f->spec);
}

class ResizeKernel : public Kernel {
 public:
  ResizeKernel(ImageDims in, int64_t h, int64_t w) : in_(in), h_(h), w_(w) {}
  absl::Status Run(const TileContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    const Window whole{0, 0, static_cast<double>(in_.w), static_cast<double>(in_.h)};
    for (int64_t r = 0; r < ctx.rows; ++r) {
      ResampleBilinear(in[0].row<uint8_t>(r), static_cast<int>(in_.w), static_cast<int>(in_.h),
                       static_cast<int>(in_.c), in_.row_elems(), whole, out[0].row<uint8_t>(r),
                       static_cast<int>(w_), static_cast<int>(h_));
    }
    return absl::OkStatus();
  }

 private:
  const ImageDims in_;
  const int64_t h_, w_;
};

absl::StatusOr<OpBinding> BindResize(const Attrs& attrs, const Schema& schema) {
  BoundField f;
  SLUICE_ASSIGN_OR_RETURN(ImageDims d, Uint8Image(attrs, schema, &f));
  SLUICE_ASSIGN_OR_RETURN(auto size, ImageSizeAttr(attrs, "size"));
  ColumnSpec out = f.spec;
  out.shape = Shape{size.first, size.second, d.c};
  return UnaryBinding(f.column, out, std::make_shared<ResizeKernel>(d, size.first, size.second));
}

std::pair<int64_t, int64_t> CenterOffsets(const ImageDims& d, int64_t h, int64_t w) {
  return {static_cast<int64_t>(CenterOffset(static_cast<double>(d.h), static_cast<double>(h))),
          static_cast<int64_t>(CenterOffset(static_cast<double>(d.w), static_cast<double>(w)))};
}

// A random window per image (RandomResizedCrop's), resized to the output.
class RandomResizedCropKernel : public Kernel {
 public:
  RandomResizedCropKernel(ImageDims in, int64_t h, int64_t w, std::vector<double> scale, std::vector<double> ratio)
      : in_(in), h_(h), w_(w), scale_(std::move(scale)), ratio_(std::move(ratio)) {}
  absl::Status Run(const TileContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    for (int64_t r = 0; r < ctx.rows; ++r) {
      SampleRng rng = ctx.Rng(r);
      const Window window = RandomResizedCropWindow(static_cast<int>(in_.w), static_cast<int>(in_.h), rng, scale_[0],
                                                    scale_[1], ratio_[0], ratio_[1]);
      ResampleBilinear(in[0].row<uint8_t>(r), static_cast<int>(in_.w), static_cast<int>(in_.h),
                       static_cast<int>(in_.c), in_.row_elems(), window, out[0].row<uint8_t>(r),
                       static_cast<int>(w_), static_cast<int>(h_));
    }
    return absl::OkStatus();
  }

 private:
  const ImageDims in_;
  const int64_t h_, w_;
  const std::vector<double> scale_, ratio_;
};

absl::StatusOr<OpBinding> BindRandomResizedCrop(const Attrs& attrs, const Schema& schema) {
  BoundField f;
  SLUICE_ASSIGN_OR_RETURN(ImageDims d, Uint8Image(attrs, schema, &f));
  SLUICE_ASSIGN_OR_RETURN(auto size, ImageSizeAttr(attrs, "size"));
  SLUICE_RETURN_IF_ERROR(CheckRandomResizedCropRanges(attrs.GetFloats("scale"), attrs.GetFloats("ratio")));
  ColumnSpec out = f.spec;
  out.shape = Shape{size.first, size.second, d.c};
  OpBinding b = UnaryBinding(f.column, out,
                             std::make_shared<RandomResizedCropKernel>(d, size.first, size.second,
                                                                       attrs.GetFloats("scale"), attrs.GetFloats("ratio")));
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
  SLUICE_ASSIGN_OR_RETURN(ImageDims d, Uint8Image(attrs, schema, &f));
  SLUICE_ASSIGN_OR_RETURN(auto size, ImageSizeAttr(attrs, "size"));
  if (size.first > d.h || size.second > d.w) {
    return AttrError("size", absl::StrCat("[", size.first, ", ", size.second, "] is larger than the image, ",
                                          f.spec.shape.ToString()));
  }
  ColumnSpec out = f.spec;
  out.shape = Shape{size.first, size.second, d.c};
  return UnaryBinding(f.column, out, std::make_shared<CenterCropKernel>(d, size.first, size.second));
}

// out[c][y][x] = (in[y][x'][c] * scale - mean[c]) / std[c], x' mirrored or
// not, as a * in + b per channel.
class CropMirrorNormalizeKernel : public Kernel {
 public:
  CropMirrorNormalizeKernel(ImageDims in, int64_t h, int64_t w, DType out, bool chw, float mirror_p,
                            std::vector<float> a, std::vector<float> b)
      : in_(in), h_(h), w_(w), out_(out), chw_(chw), mirror_p_(mirror_p), a_(std::move(a)), b_(std::move(b)) {}

  absl::Status Run(const TileContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    const auto [top, left] = CenterOffsets(in_, h_, w_);
    for (int64_t r = 0; r < ctx.rows; ++r) {
      bool mirror = mirror_p_ >= 1;
      if (mirror_p_ > 0 && mirror_p_ < 1) {
        SampleRng rng = ctx.Rng(r);
        mirror = rng.Bernoulli(mirror_p_);
      }
      const uint8_t* src = in[0].row<uint8_t>(r) + (top * in_.w + left) * in_.c;
      switch (out_) {
        case DType::kFloat32:
          Write(src, mirror, out[0].row<float>(r), [](float v) { return v; });
          break;
        case DType::kFloat16:
          Write(src, mirror, out[0].row<uint16_t>(r), HalfFromFloat);
          break;
        default:
          Write(src, mirror, out[0].row<uint8_t>(r), [](float v) { return static_cast<uint8_t>(v); });
      }
    }
    return absl::OkStatus();
  }

 private:
  template <typename T, typename Store>
  void Write(const uint8_t* src, bool mirror, T* dst, Store store) const {
    const int64_t channels = in_.c, plane = h_ * w_;
    const bool normalize = out_ != DType::kUInt8;
    for (int64_t y = 0; y < h_; ++y) {
      const uint8_t* row = src + y * in_.row_elems();
      if (chw_ && channels == 3) {  // one pass per row into three planes (vectorizes)
        T* d0 = dst + y * w_;
        T* d1 = d0 + plane;
        T* d2 = d1 + plane;
        const float a0 = normalize ? a_[0] : 1, a1 = normalize ? a_[1] : 1, a2 = normalize ? a_[2] : 1;
        const float b0 = normalize ? b_[0] : 0, b1 = normalize ? b_[1] : 0, b2 = normalize ? b_[2] : 0;
        if (mirror) {
          const uint8_t* p = row + (w_ - 1) * 3;
          for (int64_t x = 0; x < w_; ++x) {
            d0[x] = store(a0 * p[-3 * x] + b0);
            d1[x] = store(a1 * p[-3 * x + 1] + b1);
            d2[x] = store(a2 * p[-3 * x + 2] + b2);
          }
        } else {
          for (int64_t x = 0; x < w_; ++x) {
            d0[x] = store(a0 * row[3 * x] + b0);
            d1[x] = store(a1 * row[3 * x + 1] + b1);
            d2[x] = store(a2 * row[3 * x + 2] + b2);
          }
        }
        continue;
      }
      for (int64_t x = 0; x < w_; ++x) {
        const uint8_t* p = row + (mirror ? w_ - 1 - x : x) * channels;
        for (int64_t c = 0; c < channels; ++c) {
          const float v = normalize ? a_[c] * p[c] + b_[c] : p[c];
          dst[chw_ ? c * plane + y * w_ + x : (y * w_ + x) * channels + c] = store(v);
        }
      }
    }
  }

  const ImageDims in_;
  const int64_t h_, w_;
  const DType out_;
  const bool chw_;
  const float mirror_p_;
  const std::vector<float> a_, b_;
};

absl::StatusOr<OpBinding> BindCropMirrorNormalize(const Attrs& attrs, const Schema& schema) {
  BoundField f;
  SLUICE_ASSIGN_OR_RETURN(ImageDims d, Uint8Image(attrs, schema, &f));
  std::pair<int64_t, int64_t> crop{d.h, d.w};
  if (!attrs.GetInts("crop").empty()) {
    SLUICE_ASSIGN_OR_RETURN(crop, ImageSizeAttr(attrs, "crop"));
    if (crop.first > d.h || crop.second > d.w) return AttrError("crop", "is larger than the image");
  }
  absl::StatusOr<DType> dtype = ParseDType(attrs.GetString("dtype"));
  if (!dtype.ok() || (*dtype != DType::kFloat32 && *dtype != DType::kFloat16 && *dtype != DType::kUInt8)) {
    return AttrError("dtype", "must be \"float32\", \"float16\" or \"uint8\" (not normalized: for the GPU)");
  }
  const std::string& layout = attrs.GetString("layout");
  if (layout != "CHW" && layout != "HWC") return AttrError("layout", "must be \"CHW\" or \"HWC\"");
  const double mirror = attrs.GetFloat("mirror");
  if (mirror < 0 || mirror > 1) return AttrError("mirror", "is a probability: 0, 1, or in between");
  const std::vector<double>& mean = attrs.GetFloats("mean");
  const std::vector<double>& std_dev = attrs.GetFloats("std");
  const size_t c = static_cast<size_t>(d.c);
  if ((mean.size() != 1 && mean.size() != c) || (std_dev.size() != 1 && std_dev.size() != c)) {
    return AttrError("mean", absl::StrCat("mean and std need one value or one per channel (", c, ")"));
  }
  std::vector<float> a(c), b(c);
  const double scale = attrs.GetFloat("scale");
  for (size_t i = 0; i < c; ++i) {
    const double s = std_dev.size() == 1 ? std_dev[0] : std_dev[i];
    if (!(s > 0)) return AttrError("std", "must be > 0");
    const double m = mean.size() == 1 ? mean[0] : mean[i];
    a[i] = static_cast<float>(scale / s);
    b[i] = static_cast<float>(-m / s);
  }
  ColumnSpec out = f.spec;
  out.dtype = *dtype;
  out.shape = layout == "CHW" ? Shape{d.c, crop.first, crop.second} : Shape{crop.first, crop.second, d.c};
  OpBinding binding = UnaryBinding(
      f.column, out,
      std::make_shared<CropMirrorNormalizeKernel>(d, crop.first, crop.second, *dtype, layout == "CHW",
                                                  static_cast<float>(mirror), std::move(a), std::move(b)));
  binding.random = mirror > 0 && mirror < 1;
  return binding;
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
