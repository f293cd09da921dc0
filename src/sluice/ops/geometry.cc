// Geometric ops: random_flip, random_rotation, random_zoom, random_affine,
// random_perspective (warps that the graph can fuse, see warp.h) and
// hwc_to_chw.
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/kernels/layout.h"
#include "sluice/kernels/value_loops.h"
#include "sluice/kernels/warp.h"
#include "sluice/ops/builtin_ops.h"
#include "sluice/ops/field.h"
#include "sluice/ops/geometry_params.h"
#include "sluice/ops/op_registry.h"

namespace sluice::ops {
namespace {

using kernels::Affine;
using kernels::FillMode;
using kernels::SampleWriter;
using kernels::Then;
using kernels::WarpAffine;
using kernels::WarpSpec;

// How a warp writes its output: `spec` streaming its own stores, or through
// `writer` (scratch streamed out, or plain stores), as bypass_cache and
// kernels::WarpBypassFor say.
struct WarpWrite {
  WarpSpec spec;
  SampleWriter writer;
};

WarpWrite ForBypass(WarpSpec spec, bool bypass_cache) {
  const kernels::WarpBypass way = bypass_cache ? kernels::WarpBypassFor(spec) : kernels::WarpBypass::kPlain;
  spec.stream = way == kernels::WarpBypass::kItself;
  return WarpWrite{spec, SampleWriter(way == kernels::WarpBypass::kScratch)};
}

// One geometric op: an affine map drawn per sample, resampled bilinearly.
// A flip alone moves whole pixels, so it copies them instead.
class WarpKernel : public Kernel {
 public:
  using Params = WarpParams;
  explicit WarpKernel(const Params& p) : p_(p) {}

  absl::Status Run(const KernelContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    const bool flip = p_.part.kind == WarpPart::Kind::kFlip;
    // A flip's copy goes through scratch.
    WarpWrite written =
        flip ? WarpWrite{p_.spec, SampleWriter(ctx.bypass_cache)} : ForBypass(p_.spec, ctx.bypass_cache);
    const WarpSpec& spec = written.spec;
    SampleWriter& write = written.writer;
    for (int64_t r = 0; r < ctx.rows; ++r) {
      SampleRng rng = ctx.Rng(r);
      const Affine map = SampleMap(p_.part, p_.spec.dims, rng);
      write(out[0].row<uint8_t>(r), out[0].row_bytes, [&](uint8_t* dst) {
        if (flip) {
          CopyFlipped(map.m[0] < 0, map.m[4] < 0, in[0].row<const uint8_t>(r), dst);
        } else {
          WarpAffine(spec, map, in[0].row<uint8_t>(r), dst);
        }
      });
    }
    return absl::OkStatus();
  }

 private:
  void CopyFlipped(bool h, bool v, const uint8_t* src, uint8_t* dst) const {
    const ImageDims& d = p_.spec.dims;
    const int64_t pixel = d.c * DTypeSize(p_.spec.dtype);
    const int64_t row_bytes = d.w * pixel;
    for (int64_t y = 0; y < d.h; ++y) {
      const uint8_t* s = src + (v ? d.h - 1 - y : y) * row_bytes;
      uint8_t* o = dst + y * row_bytes;
      if (!h) {
        std::memcpy(o, s, row_bytes);
        continue;
      }
      kernels::MirrorRow(s, d.w, static_cast<size_t>(pixel), o);
    }
  }

  const Params p_;
};

// Consecutive warps composed into one map per sample and one resampling.
class FusedWarpKernel : public Kernel {
 public:
  using Params = FusedWarpParams;
  explicit FusedWarpKernel(const Params& p) : p_(p) {}

  absl::Status Run(const KernelContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    WarpWrite written = ForBypass(p_.spec, ctx.bypass_cache);
    const WarpSpec& spec = written.spec;
    SampleWriter& write = written.writer;
    for (int64_t r = 0; r < ctx.rows; ++r) {
      Affine map;
      for (const auto& [part, op_key] : p_.parts) {
        SampleRng rng = ctx.RngFor(op_key, r);
        map = Then(map, SampleMap(part, p_.spec.dims, rng));
      }
      write(out[0].row<uint8_t>(r), out[0].row_bytes,
            [&](uint8_t* dst) { WarpAffine(spec, map, in[0].row<uint8_t>(r), dst); });
    }
    return absl::OkStatus();
  }

 private:
  const Params p_;
};

AttrSchema FillModeAttr() {
  return AttrSchema{"fill_mode", AttrType::kString, "\"reflect\"",
                    "outside the image: \"reflect\" (dcba|abcd, Keras' default), \"nearest\" or \"constant\""}
      .OneOf({"reflect", "nearest", "constant"});
}
// The fill_mode of the torchvision-like warps: constant by default.
AttrSchema TorchvisionFillModeAttr() {
  return AttrSchema{"fill_mode", AttrType::kString, "\"constant\"",
                    "outside the image: \"constant\" (fill_value, torchvision's fill), \"reflect\" or \"nearest\""}
      .OneOf({"reflect", "nearest", "constant"});
}

AttrSchema FillValueAttr() { return {"fill_value", AttrType::kFloat, "0", "value used by fill_mode \"constant\""}; }

absl::StatusOr<WarpSpec> BindWarpSpec(const Attrs& attrs, const ColumnSpec& spec, bool has_fill) {
  SLUICE_ASSIGN_OR_RETURN(ImageDims dims, ImageDimsOf(spec));
  WarpSpec w{spec.dtype, dims, FillMode::kReflect, 0.f};
  if (!has_fill) return w;
  const std::string& mode = attrs.GetString("fill_mode");  // one of the attr's choices
  if (mode == "constant") w.fill_mode = FillMode::kConstant;
  if (mode == "nearest") w.fill_mode = FillMode::kNearest;
  w.fill_value = static_cast<float>(attrs.GetFloat("fill_value"));
  return w;
}

// A number x means [-x, x]; two numbers are [min, max].
absl::StatusOr<std::pair<double, double>> SymmetricRange(const Attrs& attrs, const char* name) {
  const std::vector<double>& v = attrs.GetFloats(name);
  if (v.size() == 1) return std::make_pair(-std::abs(v[0]), std::abs(v[0]));
  if (v.size() == 2 && v[0] <= v[1]) return std::make_pair(v[0], v[1]);
  return AttrError(name, "must be a number x (meaning [-x, x]) or [min, max] with min <= max");
}

// The image column named by "field" (uint8 or float32), warped by `part`.
absl::StatusOr<InferredOp> InferWarp(const Attrs& attrs, const Schema& schema, bool has_fill, WarpPart part) {
  SLUICE_ASSIGN_OR_RETURN(BoundField f, BindField(attrs, schema, {DType::kUInt8, DType::kFloat32}));
  SLUICE_ASSIGN_OR_RETURN(WarpSpec w, BindWarpSpec(attrs, f.spec, has_fill));
  InferredOp op = UnaryOp(f.column, f.spec, WarpParams{w, part});
  op.random = true;
  return op;
}

absl::StatusOr<InferredOp> InferFlip(const Attrs& attrs, const Schema& schema) {
  const std::string& mode = attrs.GetString("mode");  // one of the attr's choices
  WarpPart part;
  part.horizontal = mode == "horizontal" || mode == "horizontal_and_vertical";
  part.vertical = mode == "vertical" || mode == "horizontal_and_vertical";
  part.p = static_cast<float>(attrs.GetFloat("p"));
  return InferWarp(attrs, schema, false, part);
}

absl::StatusOr<InferredOp> InferRotation(const Attrs& attrs, const Schema& schema) {
  SLUICE_ASSIGN_OR_RETURN(auto range, SymmetricRange(attrs, "degrees"));
  WarpPart part;
  part.kind = WarpPart::Kind::kRotation;
  part.lo = static_cast<float>(range.first);
  part.hi = static_cast<float>(range.second);
  return InferWarp(attrs, schema, true, part);
}

absl::StatusOr<InferredOp> InferZoom(const Attrs& attrs, const Schema& schema) {
  const std::vector<double>& s = attrs.GetFloats("scale");
  if (s[1] < s[0]) return AttrError("scale", "must be [min, max] with min <= max");
  WarpPart part;
  part.kind = WarpPart::Kind::kZoom;
  part.lo = static_cast<float>(s[0]);
  part.hi = static_cast<float>(s[1]);
  return InferWarp(attrs, schema, true, part);
}

// RandomAffine's attrs: degrees as for rotation, translate [a, b] (shifts
// up to a share a of the width and b of the height), scale [min, max],
// shear x or [min, max] (x shears) or [x min, x max, y min, y max].
absl::StatusOr<InferredOp> InferAffine(const Attrs& attrs, const Schema& schema) {
  SLUICE_ASSIGN_OR_RETURN(auto degrees, SymmetricRange(attrs, "degrees"));
  WarpPart part;
  part.kind = WarpPart::Kind::kAffine;
  part.lo = static_cast<float>(degrees.first);
  part.hi = static_cast<float>(degrees.second);
  const std::vector<double>& t = attrs.GetFloats("translate");
  if (!t.empty()) {
    if (t.size() != 2) return AttrError("translate", "must be [a, b]: shares of the width and the height");
    part.translate_x = static_cast<float>(t[0]), part.translate_y = static_cast<float>(t[1]);
  }
  const std::vector<double>& s = attrs.GetFloats("scale");
  if (!s.empty()) {
    if (s.size() != 2 || s[0] > s[1]) return AttrError("scale", "must be [min, max] with min <= max");
    part.scale_lo = static_cast<float>(s[0]), part.scale_hi = static_cast<float>(s[1]);
  }
  const std::vector<double>& sh = attrs.GetFloats("shear");
  if (sh.size() == 1) {
    part.shear_x_lo = -static_cast<float>(std::abs(sh[0])), part.shear_x_hi = static_cast<float>(std::abs(sh[0]));
  } else if (sh.size() == 2 || sh.size() == 4) {
    part.shear_x_lo = static_cast<float>(sh[0]), part.shear_x_hi = static_cast<float>(sh[1]);
    if (sh.size() == 4) part.shear_y_lo = static_cast<float>(sh[2]), part.shear_y_hi = static_cast<float>(sh[3]);
  } else if (!sh.empty()) {
    return AttrError("shear", "must be x, [x min, x max] or [x min, x max, y min, y max] (degrees)");
  }
  return InferWarp(attrs, schema, true, part);
}

absl::StatusOr<InferredOp> InferPerspective(const Attrs& attrs, const Schema& schema) {
  WarpPart part;
  part.kind = WarpPart::Kind::kPerspective;
  part.distortion = attrs.GetFloat("distortion_scale");
  part.p = static_cast<float>(attrs.GetFloat("p"));
  return InferWarp(attrs, schema, true, part);
}

class HwcToChwKernel : public Kernel {
 public:
  using Params = HwcToChwParams;
  explicit HwcToChwKernel(const Params& p) : dims_(p.dims), elem_(p.elem) {}
  absl::Status Run(const KernelContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    for (int64_t r = 0; r < ctx.rows; ++r) {
      kernels::HwcToChw(dims_, elem_, in[0].row<const uint8_t>(r), out[0].row<uint8_t>(r));
    }
    return absl::OkStatus();
  }

 private:
  ImageDims dims_;
  size_t elem_;
};

absl::StatusOr<InferredOp> InferHwcToChw(const Attrs& attrs, const Schema& schema) {
  SLUICE_ASSIGN_OR_RETURN(BoundField f,
                          BindField(attrs, schema, {DType::kUInt8, DType::kInt32, DType::kInt64, DType::kFloat32}));
  if (f.spec.shape.rank() != 3) {
    return AttrError(
        "field", absl::StrCat("column '", f.spec.name, "' is ", f.spec.shape.ToString(), "; hwc_to_chw needs [H,W,C]"));
  }
  SLUICE_ASSIGN_OR_RETURN(ImageDims d, ImageDimsOf(f.spec));
  ColumnSpec out = f.spec;
  out.shape = Shape{d.c, d.h, d.w};
  return UnaryOp(f.column, out, HwcToChwParams{d, DTypeSize(f.spec.dtype)});
}

constexpr char kImage[] = "uint8 or float32 image [H,W] or [H,W,C]";

OpSchema FlipSchema() {
  return OpSchema("random_flip")
      .Doc(
          "Flips each sample with probability p per direction (Keras' RandomFlip at p 1/2; torchvision's "
          "RandomHorizontalFlip(p) and RandomVerticalFlip(p)).")
      .Attr(FieldAttr())
      .Attr(AttrSchema{"mode", AttrType::kString, "\"horizontal\"", "the directions that may flip"}.OneOf(
          {"horizontal", "vertical", "horizontal_and_vertical"}))
      .Attr(AttrSchema{"p", AttrType::kFloat, "0.5", "probability of a flip, per direction"}.Range(0, 1))
      .Input("field", kImage)
      .Output("field", "the same shape and dtype")
      .Random()
      .Infer(InferFlip);
}

OpSchema RotationSchema() {
  return OpSchema("random_rotation")
      .Doc(
          "Rotates each sample about its centre by an angle drawn uniformly per sample, with bilinear "
          "interpolation. Keras' RandomRotation(0.1) is degrees 36 (0.1 of a turn).")
      .Attr(FieldAttr())
      .Attr(AttrSchema{"degrees", AttrType::kFloats, "", "x for [-x, x], or [min, max]"}.Count(1, 2))
      .Attr(FillModeAttr())
      .Attr(FillValueAttr())
      .Input("field", kImage)
      .Output("field", "the same shape and dtype")
      .Random()
      .Infer(InferRotation);
}

OpSchema ZoomSchema() {
  return OpSchema("random_zoom")
      .Doc(
          "Scales each sample about its centre by a magnification drawn uniformly per sample (> 1 enlarges), "
          "with bilinear interpolation. Keras' RandomZoom(0.1) is about scale [0.9, 1.1].")
      .Attr(FieldAttr())
      .Attr(AttrSchema{"scale", AttrType::kFloats, "", "[min, max] magnification"}.Count(2, 2).Above(0))
      .Attr(FillModeAttr())
      .Attr(FillValueAttr())
      .Input("field", kImage)
      .Output("field", "the same shape and dtype")
      .Random()
      .Infer(InferZoom);
}

OpSchema AffineSchema() {
  return OpSchema("random_affine")
      .Doc(
          "torchvision's RandomAffine with bilinear interpolation (its default is nearest): a rotation, "
          "shift, scale and shear about the centre, each drawn per sample, resampled once (and composed "
          "with the other warps of the column into one resampling).")
      .Attr(FieldAttr())
      .Attr(AttrSchema{"degrees", AttrType::kFloats, "", "x for [-x, x], or [min, max]"}.Count(1, 2))
      .Attr(AttrSchema{"translate", AttrType::kFloats, "[]",
                       "[a, b]: shifts up to a share a of the width and b of the height, whole pixels"}
                .Range(0, 1)
                .Count(0, 2))
      .Attr(AttrSchema{"scale", AttrType::kFloats, "[]", "[min, max] of the scale; empty: 1"}.Above(0).Count(0, 2))
      .Attr(AttrSchema{"shear", AttrType::kFloats, "[]",
                       "degrees: x for x shears in [-x, x], [min, max], or [x min, x max, y min, y max]"}
                .Count(0, 4))
      .Attr(TorchvisionFillModeAttr())
      .Attr(FillValueAttr())
      .Input("field", kImage)
      .Output("field", "the same shape and dtype")
      .Random()
      .Infer(InferAffine);
}

OpSchema PerspectiveSchema() {
  return OpSchema("random_perspective")
      .Doc(
          "torchvision's RandomPerspective (bilinear): with probability p, each corner moves inward by up to "
          "distortion_scale of half the side, drawn per sample, and the image follows (one projective map, "
          "composed with the column's other warps into one resampling).")
      .Attr(FieldAttr())
      .Attr(AttrSchema{"distortion_scale", AttrType::kFloat, "0.5", "how far the corners may move"}.Range(0, 1))
      .Attr(AttrSchema{"p", AttrType::kFloat, "0.5", "probability of distorting each image"}.Range(0, 1))
      .Attr(TorchvisionFillModeAttr())
      .Attr(FillValueAttr())
      .Input("field", kImage)
      .Output("field", "the same shape and dtype")
      .Random()
      .Infer(InferPerspective);
}

}  // namespace

absl::Status RegisterGeometryOps(OpRegistry* registry) {
  for (const OpSchema& schema : {FlipSchema(), RotationSchema(), ZoomSchema(), AffineSchema(), PerspectiveSchema()}) {
    SLUICE_RETURN_IF_ERROR(registry->AddOp(schema));
  }
  for (const char* op : {"random_flip", "random_rotation", "random_zoom", "random_affine", "random_perspective"}) {
    SLUICE_RETURN_IF_ERROR(registry->AddKernel<WarpKernel>(op, Backend::kCpu));
  }
  SLUICE_RETURN_IF_ERROR(registry->AddOp(
      OpSchema(kFusedWarpOp)
          .Doc("Consecutive random_flip, random_rotation, random_zoom, random_affine and random_perspective on one "
               "column, composed into one map per sample and resampled once (made by the graph; "
               "options.no_fuse_warps opts out).")
          .Input("field", kImage)
          .Output("field", "the same shape and dtype")
          .Random()
          .Internal()));
  SLUICE_RETURN_IF_ERROR(registry->AddKernel<FusedWarpKernel>(kFusedWarpOp, Backend::kCpu));
  SLUICE_RETURN_IF_ERROR(
      registry->AddOp(OpSchema("hwc_to_chw")
                          .Doc("Transposes an [H,W,C] sample to [C,H,W] (the layout torch models take).")
                          .Attr(FieldAttr())
                          .Input("field", "[H,W,C] of any dtype")
                          .Output("field", "[C,H,W]")
                          .Infer(InferHwcToChw)));
  return registry->AddKernel<HwcToChwKernel>("hwc_to_chw", Backend::kCpu);
}

}  // namespace sluice::ops
