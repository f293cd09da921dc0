// The neighbourhood filters gaussian_blur and grey_dilation: their schemas,
// inference and cpu kernels over kernels/image_filter.h. uint8 images stay
// integers (16-bit fixed point to blur).
#include "sluice/kernels/image_filter.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/kernels/value_loops.h"
#include "sluice/ops/builtin_ops.h"
#include "sluice/ops/field.h"
#include "sluice/ops/image_filter_params.h"
#include "sluice/ops/op_registry.h"

namespace sluice::ops {
namespace {

using kernels::BlurFixedImage;
using kernels::BlurFloatImage;
using kernels::BlurTaps;
using kernels::DilateImage;
using kernels::FilterShape;
using kernels::SampleWriter;

class GaussianBlurKernel : public Kernel {
 public:
  using Params = FilterParams;
  explicit GaussianBlurKernel(const Params& p)
      : dtype_(p.dtype),
        sigma_lo_(p.sigma_lo),
        sigma_hi_(p.sigma_hi),
        fixed_(FixedSigmaTaps(p)),
        shape_(p.dims, fixed_.kh, fixed_.kw, /*reflect=*/true) {}

  absl::Status Run(const KernelContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    thread_local BlurTaps drawn;
    SampleWriter write(ctx.bypass_cache);
    DispatchImageType(dtype_, [&](auto type) {
      using T = decltype(type);
      for (int64_t r = 0; r < ctx.rows; ++r) {
        const BlurTaps* taps = &fixed_;
        if (fixed_.w.empty()) {  // one sigma per sample, as torchvision draws it
          drawn.Compute(shape_.kw, shape_.kh, ctx.Rng(r).Uniform(sigma_lo_, sigma_hi_), FixedPoint());
          taps = &drawn;
        }
        write(out[0].row<uint8_t>(r), out[0].row_bytes, [&](uint8_t* dst) {
          if constexpr (std::is_same_v<T, uint8_t>) {
            BlurFixedImage(in[0].row<const T>(r), dst, shape_, taps->q.data(), taps->q.data() + shape_.kw);
          } else {
            BlurFloatImage(in[0].row<const T>(r), reinterpret_cast<float*>(dst), shape_, taps->w.data(),
                           taps->w.data() + shape_.kw);
          }
        });
      }
    });
    return absl::OkStatus();
  }

 private:
  // A fixed sigma's taps, computed once and trimmed; a drawn sigma's are
  // computed per sample (none here, the kernel's size only).
  static BlurTaps FixedSigmaTaps(const Params& p) {
    BlurTaps taps;
    taps.kw = p.kw, taps.kh = p.kh;
    if (p.sigma_lo != p.sigma_hi) return taps;
    const bool fixed_point = p.dtype == DType::kUInt8;
    taps.Compute(p.kw, p.kh, p.sigma_lo, fixed_point);
    taps.Trim(fixed_point);
    return taps;
  }
  bool FixedPoint() const { return dtype_ == DType::kUInt8; }

  DType dtype_;
  float sigma_lo_, sigma_hi_;
  BlurTaps fixed_;
  FilterShape shape_;
};

// A k x k filter's attr: k or [kh, kw], each odd (its constraints say one
// or two values, up to kMaxKernelSize: reflected borders take any size, but
// a kernel's taps and padded rows are allocated, and no image needs more).
constexpr int kMaxKernelSize = 1023;
AttrSchema KernelSizeAttr(const char* name, const char* doc) {
  return AttrSchema{name, AttrType::kInts, "3", doc}.Count(1, 2).Range(1, kMaxKernelSize);
}

// The image column named by "field" filtered with the kernel size in attr
// `size_attr`.
absl::StatusOr<std::pair<BoundField, FilterParams>> InferFilter(const Attrs& attrs, const Schema& schema,
                                                                const char* size_attr) {
  SLUICE_ASSIGN_OR_RETURN(BoundField f, BindField(attrs, schema, {DType::kUInt8, DType::kFloat32}));
  SLUICE_ASSIGN_OR_RETURN(ImageDims dims, ImageDimsOf(f.spec));
  const std::vector<int64_t>& k = attrs.GetInts(size_attr);
  const int64_t kh = k[0], kw = k.size() == 2 ? k[1] : k[0];
  for (int64_t v : {kh, kw}) {
    if (v % 2 == 0) return AttrError(size_attr, absl::StrCat("must be odd, got ", v));
  }
  return std::make_pair(f, FilterParams{f.spec.dtype, dims, kh, kw});
}

absl::StatusOr<InferredOp> InferGaussianBlur(const Attrs& attrs, const Schema& schema) {
  SLUICE_ASSIGN_OR_RETURN(auto filter, InferFilter(attrs, schema, "ksize"));
  auto& [f, params] = filter;
  const std::vector<double>& sigma = attrs.GetFloats("sigma");
  const double lo = sigma[0], hi = sigma.size() == 2 ? sigma[1] : sigma[0];
  if (hi < lo) return AttrError("sigma", absl::StrCat("must be [min, max] with min <= max, got [", lo, ", ", hi, "]"));
  params.sigma_lo = static_cast<float>(lo);
  params.sigma_hi = static_cast<float>(hi);
  InferredOp op = UnaryOp(f.column, f.spec, params);
  op.random = lo != hi;
  return op;
}

class DilationKernel : public Kernel {
 public:
  using Params = FilterParams;
  explicit DilationKernel(const Params& p) : dtype_(p.dtype), shape_(p.dims, p.kh, p.kw, /*reflect=*/false) {}
  absl::Status Run(const KernelContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    DispatchImageType(dtype_, [&](auto type) {
      using T = decltype(type);
      for (int64_t r = 0; r < ctx.rows; ++r) {
        DilateImage(in[0].row<const T>(r), out[0].row<T>(r), shape_);
      }
    });
    return absl::OkStatus();
  }

 private:
  DType dtype_;
  FilterShape shape_;
};

absl::StatusOr<InferredOp> InferGreyDilation(const Attrs& attrs, const Schema& schema) {
  SLUICE_ASSIGN_OR_RETURN(auto filter, InferFilter(attrs, schema, "size"));
  return UnaryOp(filter.first.column, filter.first.spec, filter.second);
}

}  // namespace

absl::Status RegisterImageFilterOps(OpRegistry* registry) {
  const char* kImage = "uint8 or float32 image [H,W] or [H,W,C]";
  SLUICE_RETURN_IF_ERROR(registry->AddOp(
      OpSchema("gaussian_blur")
          .Doc("Gaussian blur with a k x k kernel, per channel, reflect-101 borders (as torchvision's GaussianBlur "
               "and TensorFlow's REFLECT padding). sigma is fixed, or drawn uniformly from [min, max] per sample "
               "(one sigma for both axes, as torchvision). uint8 input is filtered in 16-bit fixed point and "
               "rounded to nearest: within 0.1 of the exact sum before rounding (OpenCV's uint8 blur is fixed "
               "point too).")
          .Attr(FieldAttr())
          .Attr(KernelSizeAttr("ksize", "k or [kh, kw]; odd"))
          .Attr(AttrSchema{"sigma", AttrType::kFloats, "", "sigma, or [min, max] to draw it per sample"}
                    .Count(1, 2)
                    .Above(0))
          .Input("field", kImage)
          .Output("field", "the same shape and dtype")
          .Random()
          .Infer(InferGaussianBlur)));
  SLUICE_RETURN_IF_ERROR(registry->AddKernel<GaussianBlurKernel>("gaussian_blur", Backend::kCpu));
  SLUICE_RETURN_IF_ERROR(registry->AddOp(
      OpSchema("grey_dilation")
          .Doc("Grey-scale dilation with a flat k x k structuring element: each value becomes the maximum of its "
               "window, per channel; pixels outside the image are ignored (as tf.nn.dilation2d with a zero filter "
               "and SAME padding, or scipy's grey_dilation).")
          .Attr(FieldAttr())
          .Attr(KernelSizeAttr("size", "k or [kh, kw]; odd"))
          .Input("field", kImage)
          .Output("field", "the same shape and dtype")
          .Infer(InferGreyDilation)));
  return registry->AddKernel<DilationKernel>("grey_dilation", Backend::kCpu);
}

}  // namespace sluice::ops
