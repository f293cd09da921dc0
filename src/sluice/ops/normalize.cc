// crop_mirror_normalize, the last step before a model (DALI's
// CropMirrorNormalize): its schema, inference and cpu kernel; the rows are
// normalized by kernels/normalize_rows.h.
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/kernels/normalize_rows.h"
#include "sluice/ops/builtin_ops.h"
#include "sluice/ops/crop_window.h"
#include "sluice/ops/normalize_params.h"

namespace sluice::ops {

Normalizer::Normalizer(int64_t h, int64_t w, int64_t channels, DType out, bool chw, float mirror_p,
                       std::vector<float> a, std::vector<float> b)
    : layout_{h, w, channels, out, chw,
              // uint8 output keeps the levels: 1 * level + 0, exactly.
              out == DType::kUInt8 ? std::vector<float>(static_cast<size_t>(channels), 1.f) : std::move(a),
              out == DType::kUInt8 ? std::vector<float>(static_cast<size_t>(channels), 0.f) : std::move(b)},
      mirror_p_(mirror_p) {}

bool Normalizer::Mirror(const KernelContext& ctx, int64_t r, uint64_t key) const {
  if (!random()) return mirror_p_ >= 1;
  SampleRng rng = ctx.RngFor(key, r);
  return rng.Bernoulli(mirror_p_);
}

void Normalizer::Row(const uint8_t* row, int64_t y, bool mirror, uint8_t* dst) const {
  kernels::NormalizeRow(layout_, row, y, mirror, dst);
}

void Normalizer::Rows(const uint8_t* rows, int64_t stride, bool mirror, uint8_t* dst) const {
  kernels::NormalizeRows(layout_, rows, stride, 0, layout_.h, mirror, dst);
}

void Normalizer::Planes(const int16_t* levels, int64_t channel_stride, int64_t y, bool mirror, uint8_t* dst) const {
  kernels::NormalizePlanes(layout_, levels, channel_stride, y, mirror, dst);
}

namespace {

class CropMirrorNormalizeKernel : public Kernel {
 public:
  using Params = CropMirrorNormalizeParams;
  explicit CropMirrorNormalizeKernel(const Params& p) : p_(p) {}

  absl::Status Run(const KernelContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    const ImageDims& d = p_.in;
    const auto [top, left] = CenterOffsets(d, p_.h, p_.w);
    for (int64_t r = 0; r < ctx.rows; ++r) {
      const bool mirror = p_.normalizer.Mirror(ctx, r, ctx.op_key);
      const uint8_t* src = in[0].row<uint8_t>(r) + (top * d.w + left) * d.c;
      uint8_t* dst = out[0].data + r * out[0].row_bytes;
      p_.normalizer.Rows(src, d.row_elems(), mirror, dst);
    }
    return absl::OkStatus();
  }

 private:
  const Params p_;
};

absl::StatusOr<InferredOp> InferCropMirrorNormalize(const Attrs& attrs, const Schema& schema) {
  BoundField f;
  SLUICE_ASSIGN_OR_RETURN(ImageDims d, BindUint8Image(attrs, schema, &f));
  std::pair<int64_t, int64_t> crop{d.h, d.w};
  if (!attrs.GetInts("crop").empty()) {
    crop = ImageSize(attrs, "crop");
    if (crop.first > d.h || crop.second > d.w) return AttrError("crop", "is larger than the image");
  }
  const absl::StatusOr<DType> dtype = ParseDType(attrs.GetString("dtype"));  // one of the attr's choices
  const std::string& layout = attrs.GetString("layout");
  const double mirror = attrs.GetFloat("mirror");
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
    const double m = mean.size() == 1 ? mean[0] : mean[i];
    a[i] = static_cast<float>(scale / s);
    b[i] = static_cast<float>(-m / s);
  }
  ColumnSpec out = f.spec;
  out.dtype = *dtype;
  out.shape = layout == "CHW" ? Shape{d.c, crop.first, crop.second} : Shape{crop.first, crop.second, d.c};
  InferredOp op =
      UnaryOp(f.column, out,
              CropMirrorNormalizeParams{d, crop.first, crop.second,
                                        Normalizer(crop.first, crop.second, d.c, *dtype, layout == "CHW",
                                                   static_cast<float>(mirror), std::move(a), std::move(b))});
  op.random = mirror > 0 && mirror < 1;
  return op;
}

}  // namespace

absl::Status RegisterCropMirrorNormalizeOps(OpRegistry* registry) {
  SLUICE_RETURN_IF_ERROR(registry->AddOp(
      OpSchema("crop_mirror_normalize")
          .Doc("The last step before a model, fused: an optional centre crop, a mirror with probability `mirror`, "
               "normalization (in * scale - mean) / std per channel, and HWC uint8 to CHW float32 or float16; "
               "dtype uint8 skips the normalization (do it on the GPU: a quarter of the bytes across PCIe).")
          .Attr(FieldAttr())
          .Attr(AttrSchema{"crop", AttrType::kInts, "[]", "[height, width] or [size] of a centre crop; empty: none"}
                    .Count(0, 2)
                    .Range(1, 65535))
          .Attr(AttrSchema{"mirror", AttrType::kFloat, "0",
                           "probability of a horizontal mirror: 0.5 for training's random flip; none by default (as "
                           "DALI's), so that an evaluation pipeline is never flipped"}
                    .Range(0, 1))
          .Attr({"mean", AttrType::kFloats, "[0.485, 0.456, 0.406]", "per channel, after scaling (ImageNet's)"})
          .Attr(AttrSchema{"std", AttrType::kFloats, "[0.229, 0.224, 0.225]", "per channel (ImageNet's)"}.Above(0))
          .Attr({"scale", AttrType::kFloat, "0.00392156862745098", "applied first (1/255: torchvision's ToTensor)"})
          .Attr(AttrSchema{"dtype", AttrType::kString, "\"float32\"", "the output's dtype (uint8: not normalized)"}
                    .OneOf({"float32", "float16", "uint8"}))
          .Attr(AttrSchema{"layout", AttrType::kString, "\"CHW\"", "CHW (PyTorch's) or HWC"}.OneOf({"CHW", "HWC"}))
          .Input("field", "uint8 image [H,W,C]")
          .Output("field", "[C,h,w] or [h,w,C] of dtype")
          .Random()
          .Infer(InferCropMirrorNormalize)));
  return registry->AddKernel<CropMirrorNormalizeKernel>("crop_mirror_normalize", Backend::kCpu);
}

}  // namespace sluice::ops
