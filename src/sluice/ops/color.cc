// Element-wise value ops: cast, to_dtype, rescale, normalize.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/kernels/value_loops.h"
#include "sluice/ops/builtin_ops.h"
#include "sluice/ops/color_params.h"
#include "sluice/ops/field.h"
#include "sluice/ops/op_registry.h"

namespace sluice::ops {
namespace {

using kernels::ScaleOffset;
using kernels::ScaleOffsetPattern;

// Float to integer rounds toward zero and saturates (NaN becomes 0); integer
// narrowing saturates.
template <typename In, typename Out>
inline Out Convert(In x) {
  if constexpr (std::is_integral_v<Out> && !std::is_same_v<In, Out>) {
    using L = std::numeric_limits<Out>;
    if constexpr (std::is_floating_point_v<In>) {
      if (!(x == x)) return 0;
      if (x <= static_cast<In>(L::lowest())) return L::lowest();
      if (x >= static_cast<In>(L::max())) return L::max();
      return static_cast<Out>(x);
    } else {  // every integer dtype fits in int64
      const int64_t v = static_cast<int64_t>(x);
      return static_cast<Out>(std::clamp<int64_t>(v, L::lowest(), L::max()));
    }
  } else {
    return static_cast<Out>(x);
  }
}

template <typename F>
decltype(auto) DispatchAny(DType d, F&& f) {
  switch (d) {
    case DType::kUInt8:
      return f(uint8_t{});
    case DType::kInt32:
      return f(int32_t{});
    case DType::kInt64:
      return f(int64_t{});
    case DType::kFloat32:
    case DType::kFloat16:  // not among the attr's choices: no cast writes it
      break;
  }
  return f(float{});
}

class CastKernel : public Kernel {
 public:
  using Params = CastParams;
  explicit CastKernel(const Params& p) : p_(p) {}
  absl::Status Run(const KernelContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    const int64_t n = ctx.rows * p_.elems;
    DispatchAny(p_.from, [&](auto in_type) {
      using In = decltype(in_type);
      DispatchAny(p_.to, [&](auto out_type) {
        using Out = decltype(out_type);
        const In* src = reinterpret_cast<const In*>(in[0].data);
        Out* dst = reinterpret_cast<Out*>(out[0].data);
        if (p_.scale != 1) {
          for (int64_t i = 0; i < n; ++i) dst[i] = Convert<float, Out>(static_cast<float>(src[i]) * p_.scale);
          return;
        }
        for (int64_t i = 0; i < n; ++i) dst[i] = Convert<In, Out>(src[i]);
      });
    });
    return absl::OkStatus();
  }

 private:
  const Params p_;
};

absl::StatusOr<InferredOp> InferCast(const Attrs& attrs, const Schema& schema) {
  SLUICE_ASSIGN_OR_RETURN(BoundField f,
                          BindField(attrs, schema, {DType::kUInt8, DType::kInt32, DType::kInt64, DType::kFloat32}));
  // The attr's choices are dtypes.
  const absl::StatusOr<DType> to = ParseDType(attrs.GetString("dtype"));
  ColumnSpec out = f.spec;
  out.dtype = *to;
  return UnaryOp(f.column, out, CastParams{f.spec.dtype, *to, f.spec.shape.num_elements()});
}

// torchvision v2's ToDtype: a cast, or with `scale` between uint8 and
// float32, levels 0..255 to [0, 1] (times 1/255) and back (times 255.999,
// truncated, as v2's 255 + 1 - 1e-3).
absl::StatusOr<InferredOp> InferToDtype(const Attrs& attrs, const Schema& schema) {
  SLUICE_ASSIGN_OR_RETURN(InferredOp op, InferCast(attrs, schema));
  if (!attrs.GetBool("scale")) return op;
  CastParams p = op.params<CastParams>();
  if (p.from == DType::kUInt8 && p.to == DType::kFloat32) {
    p.scale = static_cast<float>(1.0 / 255);
  } else if (p.from == DType::kFloat32 && p.to == DType::kUInt8) {
    p.scale = static_cast<float>(255 + 1.0 - 1e-3);
  } else if (p.from != p.to) {
    return AttrError("scale", absl::StrCat("scales between uint8 and float32 only, not ", DTypeName(p.from), " to ",
                                           DTypeName(p.to), " (set scale false for a plain cast)"));
  }
  op.SetParams(p);
  return op;
}

class RescaleKernel : public Kernel {
 public:
  using Params = RescaleParams;
  explicit RescaleKernel(const Params& p) : p_(p) {}
  absl::Status Run(const KernelContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    DispatchImageType(p_.from, [&](auto type) {
      using T = decltype(type);
      ScaleOffset(reinterpret_cast<const T*>(in[0].data), ctx.rows * p_.elems, p_.scale, p_.offset,
                  reinterpret_cast<float*>(out[0].data), ctx.bypass_cache);
    });
    return absl::OkStatus();
  }

 private:
  const Params p_;
};

absl::StatusOr<InferredOp> InferRescale(const Attrs& attrs, const Schema& schema) {
  SLUICE_ASSIGN_OR_RETURN(BoundField f, BindField(attrs, schema, {DType::kUInt8, DType::kFloat32}));
  ColumnSpec out = f.spec;
  out.dtype = DType::kFloat32;
  return UnaryOp(f.column, out,
                 RescaleParams{f.spec.dtype, f.spec.shape.num_elements(), static_cast<float>(attrs.GetFloat("scale")),
                               static_cast<float>(attrs.GetFloat("offset"))});
}

class NormalizeKernel : public Kernel {
 public:
  using Params = NormalizeParams;
  // Channels last: the tile is one flat array whose channel pattern repeats
  // every C elements, so a precomputed pattern of whole periods keeps the
  // loop branch-free and vectorized. Channels first: one plane per channel.
  explicit NormalizeKernel(const Params& p) : from_(p.from), shape_(p.shape), channels_first_(p.channels_first) {
    const size_t c = p.a.size();
    const size_t period = c * std::max<size_t>(1, 256 / c);
    for (size_t i = 0; i < period; ++i) {
      a_.push_back(p.a[i % c]);
      b_.push_back(p.b[i % c]);
    }
  }

  absl::Status Run(const KernelContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    DispatchImageType(from_, [&](auto type) {
      using T = decltype(type);
      const T* src = reinterpret_cast<const T*>(in[0].data);
      float* dst = reinterpret_cast<float*>(out[0].data);
      const int64_t elems = shape_.num_elements();
      if (channels_first_) {
        const int64_t c = shape_.dim(0);
        const int64_t plane = elems / c;
        for (int64_t r = 0; r < ctx.rows; ++r) {
          for (int64_t ch = 0; ch < c; ++ch) {
            ScaleOffset(src + r * elems + ch * plane, plane, a_[ch], b_[ch], dst + r * elems + ch * plane,
                        ctx.bypass_cache);
          }
        }
        return;
      }
      ScaleOffsetPattern(src, ctx.rows * elems, a_.data(), b_.data(), static_cast<int64_t>(a_.size()), dst,
                         ctx.bypass_cache);
    });
    return absl::OkStatus();
  }

 private:
  DType from_;
  Shape shape_;
  bool channels_first_;
  std::vector<float> a_, b_;  // one or more whole periods of channels
};

absl::StatusOr<InferredOp> InferNormalize(const Attrs& attrs, const Schema& schema) {
  SLUICE_ASSIGN_OR_RETURN(BoundField f, BindField(attrs, schema, {DType::kUInt8, DType::kFloat32}));
  const std::vector<double>& mean = attrs.GetFloats("mean");
  const std::vector<double>& stddev = attrs.GetFloats("std");
  const std::string& layout = attrs.GetString("layout");
  const bool channels_first = layout == "CHW";
  const Shape& s = f.spec.shape;
  const int64_t channels = s.rank() == 0 ? 1 : (channels_first ? s.dim(0) : s.dim(s.rank() - 1));
  if (s.rank() < 3 && channels_first) {
    return AttrError("layout", absl::StrCat("\"CHW\" needs a rank-3 column, '", f.spec.name, "' is ", s.ToString()));
  }
  const size_t c = mean.size();
  if (c != stddev.size()) {
    return AttrError("std", absl::StrCat("has ", stddev.size(), " values but 'mean' has ", c));
  }
  if (c != 1 && static_cast<int64_t>(c) != channels) {
    // A [H,W] image has one channel; its last dim is its width.
    const std::string has = s.rank() == 2 ? "is one channel (an [H,W] image; give one mean and std)"
                                          : absl::StrCat("has ", channels, " channels");
    return AttrError("mean", absl::StrCat("has ", c, " values; column '", f.spec.name, "' ", s.ToString(), " ", has));
  }
  const size_t nc = channels_first || c > 1 ? static_cast<size_t>(channels) : 1;
  std::vector<float> a(nc), b(nc);
  const double scale = attrs.GetFloat("scale");
  for (size_t i = 0; i < nc; ++i) {
    const double sd = stddev[c == 1 ? 0 : i];
    a[i] = static_cast<float>(scale / sd);
    b[i] = static_cast<float>(-mean[c == 1 ? 0 : i] / sd);
  }
  ColumnSpec out = f.spec;
  out.dtype = DType::kFloat32;
  return UnaryOp(f.column, out, NormalizeParams{f.spec.dtype, s, channels_first, std::move(a), std::move(b)});
}

}  // namespace

absl::Status RegisterColorOps(OpRegistry* registry) {
  SLUICE_RETURN_IF_ERROR(registry->AddOp(
      OpSchema("cast")
          .Doc("Converts a column to another dtype. Float to integer rounds toward zero and saturates to the "
               "type's range (NaN becomes 0); integer narrowing saturates.")
          .Attr(FieldAttr())
          .Attr(AttrSchema{"dtype", AttrType::kString, "", "the dtype to convert to"}.OneOf(
              {"uint8", "int32", "int64", "float32"}))
          .Input("field", "uint8, int32, int64 or float32")
          .Output("field", "the same values as `dtype`")
          .Elementwise()
          .Infer(InferCast)));
  SLUICE_RETURN_IF_ERROR(registry->AddKernel<CastKernel>("cast", Backend::kCpu));
  SLUICE_RETURN_IF_ERROR(registry->AddOp(
      OpSchema("to_dtype")
          .Doc("torchvision v2's ToDtype: a cast (as `cast`), or with `scale` between uint8 and float32, levels "
               "0..255 to [0, 1] (times 1/255) and back (times 255.999, truncated and saturated).")
          .Attr(FieldAttr())
          .Attr(AttrSchema{"dtype", AttrType::kString, "", "the dtype to convert to"}.OneOf(
              {"uint8", "int32", "int64", "float32"}))
          .Attr(AttrSchema{"scale", AttrType::kBool, "false", "map the value ranges of uint8 and float32 images"})
          .Input("field", "uint8, int32, int64 or float32")
          .Output("field", "`dtype`, the same shape")
          .Infer(InferToDtype)));
  SLUICE_RETURN_IF_ERROR(registry->AddKernel<CastKernel>("to_dtype", Backend::kCpu));
  SLUICE_RETURN_IF_ERROR(
      registry->AddOp(OpSchema("rescale")
                          .Doc("out = in * scale + offset, as float32 (e.g. scale 1/255 maps uint8 pixels to [0, 1]).")
                          .Attr(FieldAttr())
                          .Attr({"scale", AttrType::kFloat, "", "multiplier"})
                          .Attr({"offset", AttrType::kFloat, "0", "added after scaling"})
                          .Input("field", "uint8 or float32")
                          .Output("field", "float32, same shape")
                          .Elementwise()
                          .Infer(InferRescale)));
  SLUICE_RETURN_IF_ERROR(registry->AddKernel<RescaleKernel>("rescale", Backend::kCpu));
  SLUICE_RETURN_IF_ERROR(registry->AddOp(
      OpSchema("normalize")
          .Doc("Per-channel normalization to float32: out = (in * scale - mean[c]) / std[c]. With scale 1/255 on "
               "uint8 input it is torchvision's ToTensor + Normalize in one pass.")
          .Attr(FieldAttr())
          .Attr({"mean", AttrType::kFloats, "", "one value, or one per channel"})
          .Attr(AttrSchema{"std", AttrType::kFloats, "", "one value, or one per channel"}.Above(0))
          .Attr({"scale", AttrType::kFloat, "1", "applied to the input before the mean is subtracted"})
          .Attr(AttrSchema{"layout", AttrType::kString, "\"HWC\"",
                           "where the channels are: \"HWC\" (last axis) or \"CHW\" (first axis)"}
                    .OneOf({"HWC", "CHW"}))
          .Input("field", "uint8 or float32")
          .Output("field", "float32, same shape")
          .Elementwise()
          .Infer(InferNormalize)));
  return registry->AddKernel<NormalizeKernel>("normalize", Backend::kCpu);
}

}  // namespace sluice::ops
