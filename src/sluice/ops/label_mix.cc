// Ops on labels and on whole batches of (image, label): one_hot, and
// torchvision's MixUp and CutMix (transforms.v2), which blend each sample
// with the one before it in the batch (the batch rolled by one) and mix
// their labels in the same proportion.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/kernels/value_loops.h"
#include "sluice/ops/builtin_ops.h"
#include "sluice/ops/field.h"
#include "sluice/ops/op_registry.h"

namespace sluice::ops {
namespace {

using kernels::Blend;

// A label column as the mixing ops read it: a class index (an integer per
// sample), or already a distribution (float32 [num_classes]).
struct LabelSpec {
  DType dtype;
  int64_t num_classes;
  bool soft() const { return dtype == DType::kFloat32; }
};

// Row r's label as a distribution over the classes, added to `out` with
// weight w; an index outside the classes is an error naming the sample.
absl::Status AddLabel(const LabelSpec& l, const ColumnRef& in, int64_t r, float w, float* out,
                      const KernelContext& ctx) {
  if (l.soft()) {
    const float* p = in.row<const float>(r);
    for (int64_t k = 0; k < l.num_classes; ++k) out[k] += w * p[k];
    return absl::OkStatus();
  }
  int64_t label = 0;
  switch (l.dtype) {
    case DType::kUInt8:
      label = *in.row<const uint8_t>(r);
      break;
    case DType::kInt32:
      label = *in.row<const int32_t>(r);
      break;
    default:
      label = *in.row<const int64_t>(r);
  }
  if (label < 0 || label >= l.num_classes) {
    return absl::InvalidArgumentError(absl::StrCat("label ", label, " of ", ctx.Where(r), " is not a class in [0, ",
                                                   l.num_classes, ") (num_classes ", l.num_classes, ")"));
  }
  out[label] += w;
  return absl::OkStatus();
}

// The label column named by attr `attr`: an integer per sample, or float32
// [num_classes] when `soft_ok`.
absl::StatusOr<std::pair<int, LabelSpec>> BindLabel(const Attrs& attrs, const Schema& schema, const char* attr,
                                                    bool soft_ok) {
  const std::string& name = attrs.GetString(attr);
  const std::optional<int> column = schema.Find(name);
  if (!column) return AttrError(attr, absl::StrCat("names no column ('", name, "'); columns: ", schema.ToString()));
  const ColumnSpec& spec = schema.column(*column);
  const LabelSpec l{spec.dtype, attrs.GetInt("num_classes")};
  const bool index = (spec.dtype == DType::kUInt8 || spec.dtype == DType::kInt32 || spec.dtype == DType::kInt64) &&
                     spec.shape.num_elements() == 1 && !spec.ragged;
  const bool soft = soft_ok && spec.dtype == DType::kFloat32 && spec.shape == Shape{l.num_classes};
  if (!index && !soft) {
    return AttrError(
        attr, absl::StrCat("column ", spec.ToString(), " must hold one integer class per sample",
                           soft_ok ? absl::StrCat(" or float32 [", l.num_classes, "] (soft labels)") : std::string()));
  }
  return std::make_pair(*column, l);
}

ColumnSpec SoftLabels(const std::string& name, int64_t num_classes) {
  return ColumnSpec{name, DType::kFloat32, Shape{num_classes}};
}

AttrSchema NumClassesAttr() {
  return AttrSchema{"num_classes", AttrType::kInt, "", "the number of classes"}.AtLeast(1);
}

class OneHotKernel : public Kernel {
 public:
  using Params = LabelSpec;
  explicit OneHotKernel(const Params& p) : l_(p) {}
  absl::Status Run(const KernelContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    for (int64_t r = 0; r < ctx.rows; ++r) {
      float* dst = out[0].row<float>(r);
      std::fill(dst, dst + l_.num_classes, 0.f);
      SLUICE_RETURN_IF_ERROR(AddLabel(l_, in[0], r, 1.f, dst, ctx));
    }
    return absl::OkStatus();
  }

 private:
  const LabelSpec l_;
};

absl::StatusOr<InferredOp> InferOneHot(const Attrs& attrs, const Schema& schema) {
  SLUICE_ASSIGN_OR_RETURN(auto label, BindLabel(attrs, schema, "field", false));
  return UnaryOp(label.first, SoftLabels(schema.column(label.first).name, label.second.num_classes), label.second);
}

struct MixParams {
  bool cutmix;
  float alpha, p;
  LabelSpec label;
  DType dtype;      // the images'
  int64_t h, w, c;  // the images' size
  bool chw;         // cutmix: the channels come first
};

// One batch: with probability p, lam ~ Beta(alpha, alpha); MixUp makes each
// image lam x[r] + (1 - lam) x[r - 1]; CutMix pastes one box of x[r - 1]
// (its area a 1 - lam share, at a uniform centre, cut at the borders) into
// each x[r] and sets lam to the share left. Labels: lam y[r] + (1 - lam) y[r - 1].
class MixKernel : public Kernel {
 public:
  using Params = MixParams;
  explicit MixKernel(const Params& p) : p_(p) {}

  absl::Status Run(const KernelContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    const int64_t rows = ctx.rows;
    SampleRng rng = ctx.Rng(0);  // one draw per batch, keyed by its first sample
    const bool apply = rows > 1 && (p_.p >= 1 || rng.Bernoulli(p_.p));
    float lam = apply ? static_cast<float>(rng.Beta(p_.alpha, p_.alpha)) : 1.f;
    int64_t x1 = 0, y1 = 0, x2 = 0, y2 = 0;
    if (apply && p_.cutmix) {
      const int64_t cx = rng.NextU32() % p_.w, cy = rng.NextU32() % p_.h;
      const double half = 0.5 * std::sqrt(1.0 - lam);
      const int64_t hw = static_cast<int64_t>(half * p_.w), hh = static_cast<int64_t>(half * p_.h);
      x1 = std::max<int64_t>(cx - hw, 0), y1 = std::max<int64_t>(cy - hh, 0);
      x2 = std::min(cx + hw, p_.w), y2 = std::min(cy + hh, p_.h);
      lam = static_cast<float>(1.0 - static_cast<double>((x2 - x1) * (y2 - y1)) / static_cast<double>(p_.w * p_.h));
    }
    // In place (OpSchema::InPlace), rows go last to first, so each reads
    // the row before it still unchanged; the last row, which the first
    // reads, is kept aside first.
    const bool in_place = in[0].data == out[0].data;
    const uint8_t* last = in[0].row<const uint8_t>(rows - 1);
    if (in_place && apply) {
      thread_local std::vector<uint8_t> kept;
      kept.assign(last, last + in[0].row_bytes);
      last = kept.data();
    }
    for (int64_t r = rows - 1; r >= 0; --r) {
      const int64_t prev = (r + rows - 1) % rows;
      const uint8_t* before = r == 0 ? last : in[0].row<const uint8_t>(prev);
      if (!apply || p_.cutmix) {
        if (!in_place) std::memcpy(out[0].row<uint8_t>(r), in[0].row<const uint8_t>(r), in[0].row_bytes);
        if (apply) PasteBox(before, x1, y1, x2, y2, out[0].row<uint8_t>(r));
      } else {
        // Plain stores: streaming them past the caches measured 20% slower here (85 against 71 µs a W3 image).
        Blend(in[0].row<const float>(r), lam, reinterpret_cast<const float*>(before), 1.f - lam, p_.h * p_.w * p_.c,
              out[0].row<float>(r), ctx.bypass_cache);
      }
      float* label = out[1].row<float>(r);
      std::fill(label, label + p_.label.num_classes, 0.f);
      SLUICE_RETURN_IF_ERROR(AddLabel(p_.label, in[1], r, lam, label, ctx));
      if (apply) SLUICE_RETURN_IF_ERROR(AddLabel(p_.label, in[1], prev, 1.f - lam, label, ctx));
    }
    return absl::OkStatus();
  }

 private:
  void PasteBox(const uint8_t* src, int64_t x1, int64_t y1, int64_t x2, int64_t y2, uint8_t* dst) const {
    const int64_t elem = DTypeSize(p_.dtype);
    if (p_.chw) {
      for (int64_t ch = 0; ch < p_.c; ++ch) {
        for (int64_t y = y1; y < y2; ++y) {
          const int64_t at = ((ch * p_.h + y) * p_.w + x1) * elem;
          std::memcpy(dst + at, src + at, (x2 - x1) * elem);
        }
      }
      return;
    }
    for (int64_t y = y1; y < y2; ++y) {
      const int64_t at = (y * p_.w + x1) * p_.c * elem;
      std::memcpy(dst + at, src + at, (x2 - x1) * p_.c * elem);
    }
  }

  const Params p_;
};

absl::StatusOr<InferredOp> InferMix(const Attrs& attrs, const Schema& schema, bool cutmix) {
  SLUICE_ASSIGN_OR_RETURN(BoundField image,
                          cutmix
                              ? BindField(attrs, schema, {DType::kUInt8, DType::kInt32, DType::kInt64, DType::kFloat32})
                              : BindField(attrs, schema, {DType::kFloat32}));
  SLUICE_ASSIGN_OR_RETURN(auto label, BindLabel(attrs, schema, "label", true));
  MixParams p{cutmix,
              static_cast<float>(attrs.GetFloat("alpha")),
              static_cast<float>(attrs.GetFloat("p")),
              label.second,
              image.spec.dtype,
              0,
              0,
              1,
              false};
  if (cutmix) {
    SLUICE_ASSIGN_OR_RETURN(LaidOutImage laid, BindLayout(attrs, image.spec, "cutmix"));
    p.h = laid.dims.h, p.w = laid.dims.w, p.c = laid.dims.c, p.chw = laid.chw;
  } else {
    p.h = 1, p.w = image.spec.shape.num_elements();  // mixup: any shape, element by element
  }
  InferredOp op;
  op.inputs = {image.column, label.first};
  op.outputs = {image.spec, SoftLabels(schema.column(label.first).name, label.second.num_classes)};
  op.SetParams(p);
  op.random = true;
  return op;
}

absl::StatusOr<InferredOp> InferMixUp(const Attrs& attrs, const Schema& schema) {
  return InferMix(attrs, schema, false);
}
absl::StatusOr<InferredOp> InferCutMix(const Attrs& attrs, const Schema& schema) {
  return InferMix(attrs, schema, true);
}

// The attrs mixup and cutmix share.
std::vector<AttrSchema> MixAttrs() {
  return {
      FieldAttr(),
      AttrSchema{"label", AttrType::kString, "\"label\"",
                 "the label column: a class per sample, or float32 [num_classes]"},
      NumClassesAttr(), AttrSchema{"alpha", AttrType::kFloat, "1", "lam ~ Beta(alpha, alpha), one per batch"}.Above(0),
      AttrSchema{"p", AttrType::kFloat, "1", "probability of mixing a batch (else labels are one-hot)"}.Range(0, 1)};
}

}  // namespace

absl::Status RegisterLabelMixOps(OpRegistry* registry) {
  SLUICE_RETURN_IF_ERROR(registry->AddOp(
      OpSchema("one_hot")
          .Doc("A class index per sample to a float32 one-hot vector (torch.nn.functional.one_hot, as float); an "
               "index outside [0, num_classes) is an error naming the sample.")
          .Attr(AttrSchema{"field", AttrType::kString, "\"label\"", "the label column"})
          .Attr(NumClassesAttr())
          .Input("field", "uint8, int32 or int64, one per sample")
          .Output("field", "float32 [num_classes]")
          .Infer(InferOneHot)));
  SLUICE_RETURN_IF_ERROR(registry->AddKernel<OneHotKernel>("one_hot", Backend::kCpu));
  OpSchema mixup("mixup");
  mixup.Doc(
      "torchvision's MixUp (transforms.v2) on a whole batch: lam ~ Beta(alpha, alpha); each sample becomes "
      "lam x[i] + (1 - lam) x[i-1] (the batch rolled by one), its label lam y[i] + (1 - lam) y[i-1] as "
      "float32 [num_classes].");
  OpSchema cutmix("cutmix");
  cutmix.Doc(
      "torchvision's CutMix (transforms.v2) on a whole batch: each image gets the box of image i-1 (the "
      "batch rolled by one) whose area is a 1 - lam share, lam ~ Beta(alpha, alpha), at a uniform centre "
      "cut at the borders; labels mix by the share of the image kept, as float32 [num_classes].");
  for (AttrSchema& a : MixAttrs()) mixup.Attr(a);
  for (AttrSchema& a : MixAttrs()) cutmix.Attr(std::move(a));
  cutmix.Attr(LayoutAttr());
  auto add = [&](OpSchema& op, const char* images, InferFn infer) {
    const std::string name = op.name();
    SLUICE_RETURN_IF_ERROR(registry->AddOp(std::move(op.Input("field", images)
                                                         .Input("label", "a class, or float32 [num_classes]")
                                                         .Output("field", "the same")
                                                         .Output("label", "float32 [num_classes]")
                                                         .Random()
                                                         .BatchLevel()
                                                         .InPlace()
                                                         .Infer(std::move(infer)))));
    return registry->AddKernel<MixKernel>(name, Backend::kCpu);
  };
  SLUICE_RETURN_IF_ERROR(add(mixup, "float32, any shape", InferMixUp));
  return add(cutmix, "images [C,H,W], [H,W,C] or [H,W]", InferCutMix);
}

}  // namespace sluice::ops
