// Ops that map each uint8 level through a table (torchvision's invert,
// posterize, solarize, autocontrast, equalize), each applied with
// probability `p` as its Random* transform, and grayscale. The tables of
// autocontrast and equalize are made per image and channel; the arithmetic
// is torchvision's on tensors, step for step, so the bytes are equal.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/kernels/image_adjust.h"
#include "sluice/kernels/luma.h"
#include "sluice/ops/builtin_ops.h"
#include "sluice/ops/field.h"
#include "sluice/ops/op_registry.h"

namespace sluice::ops {
namespace {

using kernels::ApplyLut;
using kernels::ChannelStretch;
using kernels::InvertLut;
using kernels::Luma;
using kernels::Lut;
using kernels::PosterizeLut;
using kernels::SolarizeLut;
using kernels::StretchChannels;
using kernels::TorchLuma;

struct PixelLutParams {
  enum class Kind {
    kFixed,         // one table for every image
    kAutocontrast,  // per image and channel: min..max stretched to 0..255
    kEqualize,      // per image and channel: the histogram equalized
  };
  Kind kind;
  ImageDims dims;
  Lut lut;  // kFixed
  float p;  // probability of applying it
};

class PixelLutKernel : public Kernel {
 public:
  using Params = PixelLutParams;
  explicit PixelLutKernel(const Params& p) : p_(p) {}

  absl::Status Run(const KernelContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    const int64_t n = p_.dims.elems();
    for (int64_t r = 0; r < ctx.rows; ++r) {
      const uint8_t* src = in[0].row<const uint8_t>(r);
      uint8_t* dst = out[0].row<uint8_t>(r);
      if (p_.p < 1 && !ctx.Rng(r).Bernoulli(p_.p)) {
        std::memcpy(dst, src, n);
        continue;
      }
      switch (p_.kind) {
        case PixelLutParams::Kind::kFixed:
          ApplyLut(p_.lut, n, src, dst);
          break;
        case PixelLutParams::Kind::kAutocontrast:
          StretchChannels(ChannelStretch::kAutocontrast, p_.dims, src, dst);
          break;
        case PixelLutParams::Kind::kEqualize:
          StretchChannels(ChannelStretch::kEqualize, p_.dims, src, dst);
      }
    }
    return absl::OkStatus();
  }

 private:
  const Params p_;
};

// grayscale and random_grayscale: torchvision's luma (luma.h), replicated
// to `out_channels`.
struct GrayscaleParams {
  ImageDims dims;
  int64_t out_channels;
  float p;
};

class GrayscaleKernel : public Kernel {
 public:
  using Params = GrayscaleParams;
  explicit GrayscaleKernel(const Params& p) : p_(p) {}

  absl::Status Run(const KernelContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    const int64_t pixels = p_.dims.h * p_.dims.w, oc = p_.out_channels;
    const Luma& luma = TorchLuma();
    for (int64_t r = 0; r < ctx.rows; ++r) {
      const uint8_t* src = in[0].row<const uint8_t>(r);
      uint8_t* dst = out[0].row<uint8_t>(r);
      if (p_.p < 1 && !ctx.Rng(r).Bernoulli(p_.p)) {
        std::memcpy(dst, src, pixels * oc);  // random_grayscale keeps the channels
        continue;
      }
      for (int64_t i = 0; i < pixels; ++i) {
        const uint8_t* px = src + i * p_.dims.c;
        const uint8_t gray = p_.dims.c == 1 ? px[0] : luma(px);
        for (int64_t ch = 0; ch < oc; ++ch) dst[i * oc + ch] = gray;
      }
    }
    return absl::OkStatus();
  }

 private:
  const Params p_;
};

AttrSchema ProbabilityAttr(const char* default_json, const char* what) {
  return AttrSchema{"p", AttrType::kFloat, default_json, absl::StrCat("probability of ", what, " each image")}.Range(0,
                                                                                                                     1);
}

// The uint8 image column named by "field" ([H,W] or [H,W,C]).
absl::StatusOr<std::pair<BoundField, ImageDims>> BindLevels(const Attrs& attrs, const Schema& schema) {
  SLUICE_ASSIGN_OR_RETURN(BoundField f, BindField(attrs, schema, {DType::kUInt8}));
  SLUICE_ASSIGN_OR_RETURN(ImageDims d, ImageDimsOf(f.spec));
  return std::make_pair(std::move(f), d);
}

absl::StatusOr<InferredOp> InferLut(const Attrs& attrs, const Schema& schema, PixelLutParams::Kind kind, Lut lut) {
  SLUICE_ASSIGN_OR_RETURN(auto bound, BindLevels(attrs, schema));
  const float p = static_cast<float>(attrs.GetFloat("p"));
  InferredOp op = UnaryOp(bound.first.column, bound.first.spec, PixelLutParams{kind, bound.second, lut, p});
  op.random = p < 1;
  return op;
}

absl::StatusOr<InferredOp> InferInvert(const Attrs& attrs, const Schema& schema) {
  return InferLut(attrs, schema, PixelLutParams::Kind::kFixed, InvertLut());
}

absl::StatusOr<InferredOp> InferPosterize(const Attrs& attrs, const Schema& schema) {
  return InferLut(attrs, schema, PixelLutParams::Kind::kFixed, PosterizeLut(static_cast<int>(attrs.GetInt("bits"))));
}

absl::StatusOr<InferredOp> InferSolarize(const Attrs& attrs, const Schema& schema) {
  return InferLut(attrs, schema, PixelLutParams::Kind::kFixed, SolarizeLut(attrs.GetFloat("threshold")));
}

absl::StatusOr<InferredOp> InferAutocontrast(const Attrs& attrs, const Schema& schema) {
  return InferLut(attrs, schema, PixelLutParams::Kind::kAutocontrast, Lut{});
}

absl::StatusOr<InferredOp> InferEqualize(const Attrs& attrs, const Schema& schema) {
  return InferLut(attrs, schema, PixelLutParams::Kind::kEqualize, Lut{});
}

absl::StatusOr<InferredOp> InferGray(const Attrs& attrs, const Schema& schema, int64_t out_channels, float p) {
  SLUICE_ASSIGN_OR_RETURN(auto bound, BindLevels(attrs, schema));
  auto& [f, d] = bound;
  if (f.spec.shape.rank() != 3 || (d.c != 1 && d.c != 3)) {
    return AttrError("field", absl::StrCat("column '", f.spec.name, "' is ", f.spec.shape.ToString(),
                                           "; grayscale takes an RGB (or one-channel) image [H,W,3]"));
  }
  GrayscaleParams params{d, out_channels < 0 ? d.c : out_channels, p};
  ColumnSpec out = f.spec;
  out.shape = Shape{d.h, d.w, params.out_channels};
  InferredOp op = UnaryOp(f.column, out, std::move(params));
  op.random = p < 1;
  return op;
}

absl::StatusOr<InferredOp> InferGrayscale(const Attrs& attrs, const Schema& schema) {
  const int64_t channels = attrs.GetInt("num_output_channels");
  if (channels != 1 && channels != 3) return AttrError("num_output_channels", "must be 1 or 3");
  return InferGray(attrs, schema, channels, 1.f);
}

absl::StatusOr<InferredOp> InferRandomGrayscale(const Attrs& attrs, const Schema& schema) {
  return InferGray(attrs, schema, -1, static_cast<float>(attrs.GetFloat("p")));
}

}  // namespace

absl::Status RegisterPixelOps(OpRegistry* registry) {
  const char* kLevels = "uint8 image [H,W] or [H,W,C]";
  const char* kSame = "the same shape, uint8";
  struct LutOp {
    const char* name;
    const char* doc;
    std::vector<AttrSchema> attrs;
    InferFn infer;
  };
  const std::vector<LutOp> lut_ops = {
      {"invert", "255 - each level (torchvision's invert; RandomInvert with p).", {}, InferInvert},
      {"posterize",
       "Keeps the top `bits` bits of each level (torchvision's posterize; RandomPosterize with p).",
       {AttrSchema{"bits", AttrType::kInt, "", "bits kept per level"}.Range(0, 8)},
       InferPosterize},
      {"solarize",
       "Inverts each level at or above `threshold` (torchvision's solarize; RandomSolarize with p).",
       {AttrSchema{"threshold", AttrType::kFloat, "", "levels >= threshold are inverted"}.Range(0, 256)},
       InferSolarize},
      {"autocontrast",
       "Stretches each channel's levels from its minimum..maximum to 0..255, per image (torchvision's "
       "autocontrast; RandomAutocontrast with p).",
       {},
       InferAutocontrast},
      {"equalize",
       "Equalizes each channel's histogram, per image (torchvision's equalize, which is PIL's; RandomEqualize "
       "with p).",
       {},
       InferEqualize},
  };
  for (const LutOp& o : lut_ops) {
    OpSchema schema(o.name);
    schema.Doc(o.doc).Attr(FieldAttr());
    for (const AttrSchema& a : o.attrs) schema.Attr(a);
    schema.Attr(ProbabilityAttr("1", "changing"))
        .Input("field", kLevels)
        .Output("field", kSame)
        .Random()
        .Infer(o.infer);
    SLUICE_RETURN_IF_ERROR(registry->AddOp(std::move(schema)));
    SLUICE_RETURN_IF_ERROR(registry->AddKernel<PixelLutKernel>(o.name, Backend::kCpu));
  }
  SLUICE_RETURN_IF_ERROR(registry->AddOp(
      OpSchema("grayscale")
          .Doc("Luma 0.2989 R + 0.587 G + 0.114 B of RGB images (torchvision's Grayscale, truncated as it does).")
          .Attr(FieldAttr())
          .Attr(AttrSchema{"num_output_channels", AttrType::kInt, "1", "1, or 3 (the level repeated)"})
          .Input("field", "uint8 image [H,W,3] (or [H,W,1])")
          .Output("field", "uint8 [H,W,num_output_channels]")
          .Infer(InferGrayscale)));
  SLUICE_RETURN_IF_ERROR(registry->AddKernel<GrayscaleKernel>("grayscale", Backend::kCpu));
  SLUICE_RETURN_IF_ERROR(registry->AddOp(OpSchema("random_grayscale")
                                             .Doc("grayscale with probability p, keeping the channels "
                                                  "(torchvision's RandomGrayscale).")
                                             .Attr(FieldAttr())
                                             .Attr(ProbabilityAttr("0.1", "graying"))
                                             .Input("field", "uint8 image [H,W,3] (or [H,W,1])")
                                             .Output("field", kSame)
                                             .Random()
                                             .Infer(InferRandomGrayscale)));
  return registry->AddKernel<GrayscaleKernel>("random_grayscale", Backend::kCpu);
}

}  // namespace sluice::ops
