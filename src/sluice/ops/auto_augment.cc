// rand_augment, trivial_augment_wide and auto_augment: torchvision's
// RandAugment, TrivialAugmentWide and AutoAugment on uint8 images. Each
// sample draws its ops, magnitudes and signs from the counter-based RNG and
// applies them in turn with torchvision's arithmetic (image_adjust.h); the
// geometric ones resample with nearest (torchvision's default) or bilinear.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/kernels/image_adjust.h"
#include "sluice/kernels/warp.h"
#include "sluice/ops/builtin_ops.h"
#include "sluice/ops/field.h"
#include "sluice/ops/op_registry.h"

namespace sluice::ops {
namespace {

using kernels::AdjustBrightness;
using kernels::AdjustContrast;
using kernels::AdjustSaturation;
using kernels::AdjustSharpness;
using kernels::AffineArgs;
using kernels::AffineNearest;
using kernels::ApplyLut;
using kernels::ChannelStretch;
using kernels::FillMode;
using kernels::FromCentred;
using kernels::InverseAffineMatrix;
using kernels::InvertLut;
using kernels::PosterizeLut;
using kernels::SolarizeLut;
using kernels::StretchChannels;
using kernels::WarpAffine;
using kernels::WarpSpec;

enum class AugOp {
  kIdentity,
  kShearX,
  kShearY,
  kTranslateX,
  kTranslateY,
  kRotate,
  kBrightness,
  kColor,
  kContrast,
  kSharpness,
  kPosterize,
  kSolarize,
  kAutoContrast,
  kEqualize,
  kInvert,
};

// One op of an augmentation space: its magnitude per bin (none: the op
// takes none), and whether a coin flips their sign.
struct SpaceOp {
  AugOp op;
  std::vector<double> magnitudes;
  bool is_signed = false;
};

// torch.linspace(start, end, steps) in float32: from the start up to the
// halfway point, from the end after it.
std::vector<double> Linspace(double start, double end, int steps) {
  const float s = static_cast<float>(start), e = static_cast<float>(end);
  const float step = (e - s) / static_cast<float>(steps - 1);
  std::vector<double> v(steps);
  for (int i = 0; i < steps; ++i) {
    v[i] = i < steps / 2 ? s + step * static_cast<float>(i) : e - step * static_cast<float>(steps - 1 - i);
  }
  return v;
}

// Posterize's bits: 8 - round(arange(bins) / ((bins - 1) / levels)), in float32.
std::vector<double> PosterizeBits(int bins, double levels) {
  const float divisor = static_cast<float>((bins - 1) / levels);
  std::vector<double> v(bins);
  for (int i = 0; i < bins; ++i) v[i] = 8 - std::nearbyint(static_cast<float>(i) / divisor);
  return v;
}

// RandAugment's (and AutoAugment's) space on images of h x w.
std::vector<SpaceOp> RandAugmentSpace(int bins, const ImageDims& d) {
  return {
      {AugOp::kIdentity, {}, false},
      {AugOp::kShearX, Linspace(0, 0.3, bins), true},
      {AugOp::kShearY, Linspace(0, 0.3, bins), true},
      {AugOp::kTranslateX, Linspace(0, 150.0 / 331.0 * static_cast<double>(d.w), bins), true},
      {AugOp::kTranslateY, Linspace(0, 150.0 / 331.0 * static_cast<double>(d.h), bins), true},
      {AugOp::kRotate, Linspace(0, 30, bins), true},
      {AugOp::kBrightness, Linspace(0, 0.9, bins), true},
      {AugOp::kColor, Linspace(0, 0.9, bins), true},
      {AugOp::kContrast, Linspace(0, 0.9, bins), true},
      {AugOp::kSharpness, Linspace(0, 0.9, bins), true},
      {AugOp::kPosterize, PosterizeBits(bins, 4), false},
      {AugOp::kSolarize, Linspace(255, 0, bins), false},
      {AugOp::kAutoContrast, {}, false},
      {AugOp::kEqualize, {}, false},
  };
}

std::vector<SpaceOp> TrivialAugmentSpace(int bins) {
  return {
      {AugOp::kIdentity, {}, false},
      {AugOp::kShearX, Linspace(0, 0.99, bins), true},
      {AugOp::kShearY, Linspace(0, 0.99, bins), true},
      {AugOp::kTranslateX, Linspace(0, 32, bins), true},
      {AugOp::kTranslateY, Linspace(0, 32, bins), true},
      {AugOp::kRotate, Linspace(0, 135, bins), true},
      {AugOp::kBrightness, Linspace(0, 0.99, bins), true},
      {AugOp::kColor, Linspace(0, 0.99, bins), true},
      {AugOp::kContrast, Linspace(0, 0.99, bins), true},
      {AugOp::kSharpness, Linspace(0, 0.99, bins), true},
      {AugOp::kPosterize, PosterizeBits(bins, 6), false},
      {AugOp::kSolarize, Linspace(255, 0, bins), false},
      {AugOp::kAutoContrast, {}, false},
      {AugOp::kEqualize, {}, false},
  };
}

// One step of an AutoAugment sub-policy: the op, its probability, and its
// magnitude's bin of 10 (-1: none).
struct PolicyStep {
  AugOp op;
  float p;
  int bin;
};
using SubPolicy = std::array<PolicyStep, 2>;

// The policies learned in the AutoAugment paper, as torchvision lists them.
std::vector<SubPolicy> Policy(const std::string& name) {
  using A = AugOp;
  if (name == "cifar10") {
    return {{{{A::kInvert, 0.1f, -1}, {A::kContrast, 0.2f, 6}}},
            {{{A::kRotate, 0.7f, 2}, {A::kTranslateX, 0.3f, 9}}},
            {{{A::kSharpness, 0.8f, 1}, {A::kSharpness, 0.9f, 3}}},
            {{{A::kShearY, 0.5f, 8}, {A::kTranslateY, 0.7f, 9}}},
            {{{A::kAutoContrast, 0.5f, -1}, {A::kEqualize, 0.9f, -1}}},
            {{{A::kShearY, 0.2f, 7}, {A::kPosterize, 0.3f, 7}}},
            {{{A::kColor, 0.4f, 3}, {A::kBrightness, 0.6f, 7}}},
            {{{A::kSharpness, 0.3f, 9}, {A::kBrightness, 0.7f, 9}}},
            {{{A::kEqualize, 0.6f, -1}, {A::kEqualize, 0.5f, -1}}},
            {{{A::kContrast, 0.6f, 7}, {A::kSharpness, 0.6f, 5}}},
            {{{A::kColor, 0.7f, 7}, {A::kTranslateX, 0.5f, 8}}},
            {{{A::kEqualize, 0.3f, -1}, {A::kAutoContrast, 0.4f, -1}}},
            {{{A::kTranslateY, 0.4f, 3}, {A::kSharpness, 0.2f, 6}}},
            {{{A::kBrightness, 0.9f, 6}, {A::kColor, 0.2f, 8}}},
            {{{A::kSolarize, 0.5f, 2}, {A::kInvert, 0.0f, -1}}},
            {{{A::kEqualize, 0.2f, -1}, {A::kAutoContrast, 0.6f, -1}}},
            {{{A::kEqualize, 0.2f, -1}, {A::kEqualize, 0.6f, -1}}},
            {{{A::kColor, 0.9f, 9}, {A::kEqualize, 0.6f, -1}}},
            {{{A::kAutoContrast, 0.8f, -1}, {A::kSolarize, 0.2f, 8}}},
            {{{A::kBrightness, 0.1f, 3}, {A::kColor, 0.7f, 0}}},
            {{{A::kSolarize, 0.4f, 5}, {A::kAutoContrast, 0.9f, -1}}},
            {{{A::kTranslateY, 0.9f, 9}, {A::kTranslateY, 0.7f, 9}}},
            {{{A::kAutoContrast, 0.9f, -1}, {A::kSolarize, 0.8f, 3}}},
            {{{A::kEqualize, 0.8f, -1}, {A::kInvert, 0.1f, -1}}},
            {{{A::kTranslateY, 0.7f, 9}, {A::kAutoContrast, 0.9f, -1}}}};
  }
  if (name == "svhn") {
    return {{{{A::kShearX, 0.9f, 4}, {A::kInvert, 0.2f, -1}}},
            {{{A::kShearY, 0.9f, 8}, {A::kInvert, 0.7f, -1}}},
            {{{A::kEqualize, 0.6f, -1}, {A::kSolarize, 0.6f, 6}}},
            {{{A::kInvert, 0.9f, -1}, {A::kEqualize, 0.6f, -1}}},
            {{{A::kEqualize, 0.6f, -1}, {A::kRotate, 0.9f, 3}}},
            {{{A::kShearX, 0.9f, 4}, {A::kAutoContrast, 0.8f, -1}}},
            {{{A::kShearY, 0.9f, 8}, {A::kInvert, 0.4f, -1}}},
            {{{A::kShearY, 0.9f, 5}, {A::kSolarize, 0.2f, 6}}},
            {{{A::kInvert, 0.9f, -1}, {A::kAutoContrast, 0.8f, -1}}},
            {{{A::kEqualize, 0.6f, -1}, {A::kRotate, 0.9f, 3}}},
            {{{A::kShearX, 0.9f, 4}, {A::kSolarize, 0.3f, 3}}},
            {{{A::kShearY, 0.8f, 8}, {A::kInvert, 0.7f, -1}}},
            {{{A::kEqualize, 0.9f, -1}, {A::kTranslateY, 0.6f, 6}}},
            {{{A::kInvert, 0.9f, -1}, {A::kEqualize, 0.6f, -1}}},
            {{{A::kContrast, 0.3f, 3}, {A::kRotate, 0.8f, 4}}},
            {{{A::kInvert, 0.8f, -1}, {A::kTranslateY, 0.0f, 2}}},
            {{{A::kShearY, 0.7f, 6}, {A::kSolarize, 0.4f, 8}}},
            {{{A::kInvert, 0.6f, -1}, {A::kRotate, 0.8f, 4}}},
            {{{A::kShearY, 0.3f, 7}, {A::kTranslateX, 0.9f, 3}}},
            {{{A::kShearX, 0.1f, 6}, {A::kInvert, 0.6f, -1}}},
            {{{A::kSolarize, 0.7f, 2}, {A::kTranslateY, 0.6f, 7}}},
            {{{A::kShearY, 0.8f, 4}, {A::kInvert, 0.8f, -1}}},
            {{{A::kShearX, 0.7f, 9}, {A::kTranslateY, 0.8f, 3}}},
            {{{A::kShearY, 0.8f, 5}, {A::kAutoContrast, 0.7f, -1}}},
            {{{A::kShearX, 0.7f, 2}, {A::kInvert, 0.1f, -1}}}};
  }
  return {
      {{{A::kPosterize, 0.4f, 8}, {A::kRotate, 0.6f, 9}}},    {{{A::kSolarize, 0.6f, 5}, {A::kAutoContrast, 0.6f, -1}}},
      {{{A::kEqualize, 0.8f, -1}, {A::kEqualize, 0.6f, -1}}}, {{{A::kPosterize, 0.6f, 7}, {A::kPosterize, 0.6f, 6}}},
      {{{A::kEqualize, 0.4f, -1}, {A::kSolarize, 0.2f, 4}}},  {{{A::kEqualize, 0.4f, -1}, {A::kRotate, 0.8f, 8}}},
      {{{A::kSolarize, 0.6f, 3}, {A::kEqualize, 0.6f, -1}}},  {{{A::kPosterize, 0.8f, 5}, {A::kEqualize, 1.0f, -1}}},
      {{{A::kRotate, 0.2f, 3}, {A::kSolarize, 0.6f, 8}}},     {{{A::kEqualize, 0.6f, -1}, {A::kPosterize, 0.4f, 6}}},
      {{{A::kRotate, 0.8f, 8}, {A::kColor, 0.4f, 0}}},        {{{A::kRotate, 0.4f, 9}, {A::kEqualize, 0.6f, -1}}},
      {{{A::kEqualize, 0.0f, -1}, {A::kEqualize, 0.8f, -1}}}, {{{A::kInvert, 0.6f, -1}, {A::kEqualize, 1.0f, -1}}},
      {{{A::kColor, 0.6f, 4}, {A::kContrast, 1.0f, 8}}},      {{{A::kRotate, 0.8f, 8}, {A::kColor, 1.0f, 2}}},
      {{{A::kColor, 0.8f, 8}, {A::kSolarize, 0.8f, 7}}},      {{{A::kSharpness, 0.4f, 7}, {A::kInvert, 0.6f, -1}}},
      {{{A::kShearX, 0.6f, 5}, {A::kEqualize, 1.0f, -1}}},    {{{A::kColor, 0.4f, 0}, {A::kEqualize, 0.6f, -1}}},
      {{{A::kEqualize, 0.4f, -1}, {A::kSolarize, 0.2f, 4}}},  {{{A::kSolarize, 0.6f, 5}, {A::kAutoContrast, 0.6f, -1}}},
      {{{A::kInvert, 0.6f, -1}, {A::kEqualize, 1.0f, -1}}},   {{{A::kColor, 0.6f, 4}, {A::kContrast, 1.0f, 8}}},
      {{{A::kEqualize, 0.8f, -1}, {A::kEqualize, 0.6f, -1}}}};
}

struct AugmentParams {
  enum class Kind { kRand, kTrivial, kAuto };
  Kind kind;
  ImageDims dims;
  std::vector<uint8_t> fill;  // one level per channel
  bool bilinear;
  // kRand and kTrivial: the ops drawn from; kRand applies num_ops of them
  // at bin `magnitude`, kTrivial one at a bin drawn.
  std::vector<SpaceOp> space;
  int num_ops = 0, magnitude = 0;
  // kAuto: the sub-policies (one drawn per sample) and the magnitudes of
  // their ops, by AugOp, over 10 bins.
  std::vector<SubPolicy> policy;
  std::vector<SpaceOp> policy_space;
};

// One image and a buffer of its size: ops that cannot work in place write
// the other and swap.
class ImageBuffers {
 public:
  ImageBuffers(uint8_t* image, uint8_t* spare) : cur_(image), spare_(spare) {}
  uint8_t* cur() const { return cur_; }
  uint8_t* spare() const { return spare_; }
  void Swap() { std::swap(cur_, spare_); }

 private:
  uint8_t* cur_;
  uint8_t* spare_;
};

class AugmentKernel : public Kernel {
 public:
  using Params = AugmentParams;
  explicit AugmentKernel(const Params& p) : p_(p) {}

  absl::Status Run(const KernelContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    const int64_t bytes = in[0].row_bytes;
    thread_local std::vector<uint8_t> spare;  // per thread, grown once
    spare.resize(bytes);
    for (int64_t r = 0; r < ctx.rows; ++r) {
      uint8_t* dst = out[0].row<uint8_t>(r);
      std::memcpy(dst, in[0].row<const uint8_t>(r), bytes);
      ImageBuffers img(dst, spare.data());
      SampleRng rng = ctx.Rng(r);
      switch (p_.kind) {
        case AugmentParams::Kind::kRand:
          for (int k = 0; k < p_.num_ops; ++k) {
            const SpaceOp& op = p_.space[rng.NextU32() % p_.space.size()];
            ApplyDrawn(op, p_.magnitude, rng.Bernoulli(0.5f), img);
          }
          break;
        case AugmentParams::Kind::kTrivial: {
          const SpaceOp& op = p_.space[rng.NextU32() % p_.space.size()];
          const int bin = static_cast<int>(rng.NextU32() % static_cast<uint32_t>(p_.magnitude + 1));
          ApplyDrawn(op, bin, rng.Bernoulli(0.5f), img);
          break;
        }
        case AugmentParams::Kind::kAuto: {
          const SubPolicy& sub = p_.policy[rng.NextU32() % p_.policy.size()];
          for (const PolicyStep& step : sub) {
            const bool apply = rng.UniformDouble() <= step.p;
            const bool negative = rng.Bernoulli(0.5f);
            if (!apply) continue;
            const SpaceOp& op = p_.policy_space[static_cast<int>(step.op)];
            ApplyDrawn(op, step.bin, negative, img);
          }
          break;
        }
      }
      if (img.cur() != dst) std::memcpy(dst, img.cur(), bytes);
    }
    return absl::OkStatus();
  }

 private:
  // `op` at its magnitude of `bin`, negated when it is signed and `negative`.
  void ApplyDrawn(const SpaceOp& op, int bin, bool negative, ImageBuffers& img) const {
    double m = op.magnitudes.empty() ? 0.0 : op.magnitudes[bin];
    if (op.is_signed && negative) m = -m;
    Apply(op.op, m, img);
  }

  // _apply_op(img, op, magnitude).
  void Apply(AugOp op, double m, ImageBuffers& img) const {
    const ImageDims& d = p_.dims;
    const int64_t n = d.elems();
    constexpr double kDegreesPerRadian = 180.0 / 3.14159265358979323846;  // Python's math.degrees
    AffineArgs affine;
    switch (op) {
      case AugOp::kIdentity:
        return;
      case AugOp::kShearX:  // about the top-left corner: center [0, 0] of F.affine
      case AugOp::kShearY:
        affine.center_x = -0.5 * static_cast<double>(d.w), affine.center_y = -0.5 * static_cast<double>(d.h);
        (op == AugOp::kShearX ? affine.shear_x : affine.shear_y) = std::atan(m) * kDegreesPerRadian;
        return Warp(affine, img);
      case AugOp::kTranslateX:
        affine.translate_x = std::trunc(m);
        return Warp(affine, img);
      case AugOp::kTranslateY:
        affine.translate_y = std::trunc(m);
        return Warp(affine, img);
      case AugOp::kRotate:  // F.rotate turns the other way from F.affine
        affine.angle = -m;
        return Warp(affine, img);
      case AugOp::kBrightness:
        return AdjustBrightness(1.0 + m, d, img.cur());
      case AugOp::kColor:
        return AdjustSaturation(1.0 + m, d, img.cur());
      case AugOp::kContrast:
        return AdjustContrast(1.0 + m, d, img.cur());
      case AugOp::kSharpness:
        AdjustSharpness(1.0 + m, d, img.cur(), img.spare());
        return img.Swap();
      case AugOp::kPosterize:
        return ApplyLut(PosterizeLut(static_cast<int>(m)), n, img.cur(), img.cur());
      case AugOp::kSolarize:
        return ApplyLut(SolarizeLut(m), n, img.cur(), img.cur());
      case AugOp::kAutoContrast:
        return StretchChannels(ChannelStretch::kAutocontrast, d, img.cur(), img.cur());
      case AugOp::kEqualize:
        return StretchChannels(ChannelStretch::kEqualize, d, img.cur(), img.cur());
      case AugOp::kInvert:
        return ApplyLut(InvertLut(), n, img.cur(), img.cur());
    }
  }

  void Warp(const AffineArgs& args, ImageBuffers& img) const {
    double m[6];
    InverseAffineMatrix(args, m);
    if (p_.bilinear) {
      // Zeros (or the one fill level) outside, blended in, rounded to levels.
      const WarpSpec spec{DType::kUInt8, p_.dims, FillMode::kConstant, static_cast<float>(p_.fill[0])};
      WarpAffine(spec, FromCentred(m, p_.dims), img.cur(), img.spare());
    } else {
      AffineNearest(p_.dims, m, p_.fill.data(), img.cur(), img.spare());
    }
    img.Swap();
  }

  const Params p_;
};

constexpr int kAutoAugmentBins = 10;

// The attrs every policy has: the image, interpolation and fill.
absl::StatusOr<AugmentParams> BindCommon(const Attrs& attrs, const Schema& schema, AugmentParams::Kind kind,
                                         BoundField* f) {
  SLUICE_ASSIGN_OR_RETURN(auto bound, BindColorImage(attrs, schema));
  *f = bound.first;
  AugmentParams p;
  p.kind = kind;
  p.dims = bound.second;
  p.bilinear = attrs.GetString("interpolation") == "bilinear";
  const std::vector<double>& fill = attrs.GetFloats("fill");
  for (double v : fill) {
    if (v < 0 || v > 255) return AttrError("fill", absl::StrCat("levels lie in [0, 255]; got ", v));
  }
  SLUICE_ASSIGN_OR_RETURN(p.fill, FillPixel(fill, DType::kUInt8, p.dims.c));
  if (p.bilinear && std::any_of(p.fill.begin(), p.fill.end(), [&](uint8_t v) { return v != p.fill[0]; })) {
    return AttrError("fill", "interpolation \"bilinear\" takes one fill level for every channel");
  }
  return p;
}

absl::StatusOr<int> BindBins(const Attrs& attrs) {
  const int64_t bins = attrs.GetInt("num_magnitude_bins");
  if (bins < 2) return AttrError("num_magnitude_bins", absl::StrCat("must be >= 2; got ", bins));
  return static_cast<int>(bins);
}

InferredOp Made(const BoundField& f, AugmentParams p) {
  InferredOp op = UnaryOp(f.column, f.spec, std::move(p));
  op.random = true;
  return op;
}

absl::StatusOr<InferredOp> InferRandAugment(const Attrs& attrs, const Schema& schema) {
  BoundField f;
  SLUICE_ASSIGN_OR_RETURN(AugmentParams p, BindCommon(attrs, schema, AugmentParams::Kind::kRand, &f));
  SLUICE_ASSIGN_OR_RETURN(const int bins, BindBins(attrs));
  const int64_t magnitude = attrs.GetInt("magnitude");
  if (magnitude >= bins) {
    return AttrError("magnitude",
                     absl::StrCat("is a bin of num_magnitude_bins (", bins, "): 0..", bins - 1, "; got ", magnitude));
  }
  p.space = RandAugmentSpace(bins, p.dims);
  p.num_ops = static_cast<int>(attrs.GetInt("num_ops"));
  p.magnitude = static_cast<int>(magnitude);
  return Made(f, std::move(p));
}

absl::StatusOr<InferredOp> InferTrivialAugment(const Attrs& attrs, const Schema& schema) {
  BoundField f;
  SLUICE_ASSIGN_OR_RETURN(AugmentParams p, BindCommon(attrs, schema, AugmentParams::Kind::kTrivial, &f));
  SLUICE_ASSIGN_OR_RETURN(const int bins, BindBins(attrs));
  p.space = TrivialAugmentSpace(bins);
  p.magnitude = bins - 1;  // the highest bin drawn
  return Made(f, std::move(p));
}

absl::StatusOr<InferredOp> InferAutoAugment(const Attrs& attrs, const Schema& schema) {
  BoundField f;
  SLUICE_ASSIGN_OR_RETURN(AugmentParams p, BindCommon(attrs, schema, AugmentParams::Kind::kAuto, &f));
  p.policy = Policy(attrs.GetString("policy"));
  // By AugOp: RandAugment's space over 10 bins, then Invert.
  p.policy_space = RandAugmentSpace(kAutoAugmentBins, p.dims);
  p.policy_space.push_back({AugOp::kInvert, {}, false});
  return Made(f, std::move(p));
}

AttrSchema InterpolationAttr() {
  return AttrSchema{"interpolation", AttrType::kString, "\"nearest\"",
                    "of the shears, shifts and rotations: nearest (torchvision's default) or bilinear"}
      .OneOf({"nearest", "bilinear"});
}

// A policy op: its own attrs between the field and the interpolation and
// fill that every policy has.
absl::Status AddPolicyOp(OpRegistry* registry, const char* name, const char* doc, std::vector<AttrSchema> attrs,
                         InferFn infer) {
  OpSchema schema(name);
  schema.Doc(doc).Attr(FieldAttr());
  for (AttrSchema& a : attrs) schema.Attr(std::move(a));
  schema.Attr(InterpolationAttr())
      .Attr(FillAttr("the levels outside the image after a shear, shift or rotation"))
      .Input("field", "uint8 image [H,W,3], [H,W,1] or [H,W]")
      .Output("field", "the same")
      .Random()
      .Infer(std::move(infer));
  SLUICE_RETURN_IF_ERROR(registry->AddOp(std::move(schema)));
  return registry->AddKernel<AugmentKernel>(name, Backend::kCpu);
}

AttrSchema BinsAttr() { return {"num_magnitude_bins", AttrType::kInt, "31", "bins from no change to the strongest"}; }

}  // namespace

absl::Status RegisterAutoAugmentOps(OpRegistry* registry) {
  SLUICE_RETURN_IF_ERROR(AddPolicyOp(
      registry, "rand_augment",
      "torchvision's RandAugment: num_ops ops drawn per sample from its 14 (identity, shear x/y, translate x/y, "
      "rotate, brightness, color, contrast, sharpness, posterize, solarize, autocontrast, equalize), each at bin "
      "`magnitude` of num_magnitude_bins, signed ones negated half the time.",
      // At most 100: a billion ops a sample ran for hours, with no word.
      {AttrSchema{"num_ops", AttrType::kInt, "2", "ops applied per sample"}.Range(0, 100),
       AttrSchema{"magnitude", AttrType::kInt, "9", "the bin of every op's magnitude"}.AtLeast(0), BinsAttr()},
      InferRandAugment));
  SLUICE_RETURN_IF_ERROR(AddPolicyOp(registry, "trivial_augment_wide",
                                     "torchvision's TrivialAugmentWide: one op per sample from RandAugment's 14, at "
                                     "a bin drawn uniformly of num_magnitude_bins over its wide ranges.",
                                     {BinsAttr()}, InferTrivialAugment));
  return AddPolicyOp(registry, "auto_augment",
                     "torchvision's AutoAugment: one of the policy's 25 sub-policies per sample, each of its two ops "
                     "applied with its probability at its magnitude.",
                     {AttrSchema{"policy", AttrType::kString, "\"imagenet\"", "the learned policy"}.OneOf(
                         {"imagenet", "cifar10", "svhn"})},
                     InferAutoAugment);
}

}  // namespace sluice::ops
