// random_erasing: torchvision's RandomErasing (Zhong et al., "Random Erasing
// Data Augmentation"): with probability p, one box of each image, of a
// random area share and aspect ratio, is set to a value or to noise.
#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/kernels/value_loops.h"
#include "sluice/ops/builtin_ops.h"
#include "sluice/ops/field.h"
#include "sluice/ops/op_registry.h"
#include "sluice/ops/python_round.h"

namespace sluice::ops {
namespace {

using kernels::StoreAs;

struct ErasingParams {
  DType dtype;
  int64_t c, h, w;
  bool chw;
  float p;
  double scale_lo, scale_hi, log_ratio_lo, log_ratio_hi;
  bool noise;                  // standard normal values (float32 only)
  std::vector<uint8_t> value;  // one pixel of the value, in the dtype
};

struct Box {
  int64_t top = 0, left = 0, h = 0, w = 0;
};

// RandomErasing.get_params: ten tries at an area share and a log-uniform
// ratio whose rounded box fits inside the image, then a uniform place.
Box DrawBox(const ErasingParams& p, SampleRng& rng) {
  const double area = static_cast<double>(p.h * p.w);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double erase = area * rng.Uniform(static_cast<float>(p.scale_lo), static_cast<float>(p.scale_hi));
    const double aspect = std::exp(rng.Uniform(static_cast<float>(p.log_ratio_lo), static_cast<float>(p.log_ratio_hi)));
    const auto h = static_cast<int64_t>(PythonRound(std::sqrt(erase * aspect)));
    const auto w = static_cast<int64_t>(PythonRound(std::sqrt(erase / aspect)));
    if (!(h < p.h && w < p.w)) continue;
    Box b{0, 0, h, w};
    b.top = rng.NextU32() % static_cast<uint32_t>(p.h - h + 1);
    b.left = rng.NextU32() % static_cast<uint32_t>(p.w - w + 1);
    return b;
  }
  return Box{};
}

class ErasingKernel : public Kernel {
 public:
  using Params = ErasingParams;
  explicit ErasingKernel(const Params& p) : p_(p) {}

  absl::Status Run(const KernelContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    for (int64_t r = 0; r < ctx.rows; ++r) {
      uint8_t* dst = out[0].row<uint8_t>(r);
      std::memcpy(dst, in[0].row<const uint8_t>(r), in[0].row_bytes);
      SampleRng rng = ctx.Rng(r);
      if (!rng.Bernoulli(p_.p)) continue;
      const Box b = DrawBox(p_, rng);
      if (b.h == 0) continue;
      if (p_.noise) {
        Noise(b, rng, reinterpret_cast<float*>(dst));
      } else {
        Fill(b, dst);
      }
    }
    return absl::OkStatus();
  }

 private:
  // Element (ch, y, x) of an image in the op's layout.
  int64_t At(int64_t ch, int64_t y, int64_t x) const {
    return p_.chw ? (ch * p_.h + y) * p_.w + x : (y * p_.w + x) * p_.c + ch;
  }

  // Typed stores: a memcpy call an element took several times as long.
  void Fill(const Box& b, uint8_t* dst) const {
    DispatchImageType(p_.dtype, [&](auto t) {
      using T = decltype(t);
      T* out = reinterpret_cast<T*>(dst);
      for (int64_t ch = 0; ch < p_.c; ++ch) {
        T value;
        std::memcpy(&value, p_.value.data() + ch * sizeof(T), sizeof(T));
        for (int64_t y = b.top; y < b.top + b.h; ++y) {
          for (int64_t x = b.left; x < b.left + b.w; ++x) out[At(ch, y, x)] = value;
        }
      }
    });
  }

  // The values in torchvision's order: channel, then row, then column.
  void Noise(const Box& b, SampleRng& rng, float* dst) const {
    for (int64_t ch = 0; ch < p_.c; ++ch) {
      for (int64_t y = b.top; y < b.top + b.h; ++y) {
        for (int64_t x = b.left; x < b.left + b.w; ++x) dst[At(ch, y, x)] = static_cast<float>(rng.Normal());
      }
    }
  }

  const Params p_;
};

absl::StatusOr<InferredOp> InferErasing(const Attrs& attrs, const Schema& schema) {
  SLUICE_ASSIGN_OR_RETURN(BoundField f, BindField(attrs, schema, {DType::kUInt8, DType::kFloat32}));
  SLUICE_ASSIGN_OR_RETURN(LaidOutImage laid, BindLayout(attrs, f.spec, "random_erasing"));
  ErasingParams p{};
  p.dtype = f.spec.dtype, p.c = laid.dims.c, p.h = laid.dims.h, p.w = laid.dims.w, p.chw = laid.chw;
  p.p = static_cast<float>(attrs.GetFloat("p"));
  const std::vector<double>& scale = attrs.GetFloats("scale");
  const std::vector<double>& ratio = attrs.GetFloats("ratio");
  if (scale[0] > scale[1]) return AttrError("scale", "must be [min, max] with min <= max");
  if (ratio[0] > ratio[1]) return AttrError("ratio", "must be [min, max] with min <= max");
  p.scale_lo = scale[0], p.scale_hi = scale[1];
  p.log_ratio_lo = std::log(ratio[0]), p.log_ratio_hi = std::log(ratio[1]);
  p.noise = attrs.GetBool("random_value");
  if (p.noise && f.spec.dtype != DType::kFloat32) {
    return AttrError("random_value", absl::StrCat("draws normal noise, which needs float32 images; column ",
                                                  f.spec.ToString(), " is not"));
  }
  const std::vector<double>& value = attrs.GetFloats("value");
  if (value.size() != 1 && static_cast<int64_t>(value.size()) != p.c) {
    return AttrError("value", absl::StrCat("has ", value.size(), " values; give one, or one per channel (", p.c, ")"));
  }
  p.value.resize(p.c * DTypeSize(f.spec.dtype));
  DispatchImageType(f.spec.dtype, [&](auto t) {
    using T = decltype(t);
    for (int64_t ch = 0; ch < p.c; ++ch) {
      const T v = StoreAs<T>(static_cast<float>(value[value.size() == 1 ? 0 : ch]));
      std::memcpy(p.value.data() + ch * sizeof(T), &v, sizeof(T));
    }
  });
  InferredOp op = UnaryOp(f.column, f.spec, std::move(p));
  op.random = true;
  return op;
}

}  // namespace

absl::Status RegisterRandomErasingOps(OpRegistry* registry) {
  SLUICE_RETURN_IF_ERROR(registry->AddOp(
      OpSchema("random_erasing")
          .Doc("With probability p, sets one box of each image to `value` (or to standard normal noise): "
               "torchvision's RandomErasing, its box a `scale` share of the area with a log-uniform aspect "
               "`ratio`, ten tries to fit, else no box.")
          .Attr(FieldAttr())
          .Attr(AttrSchema{"p", AttrType::kFloat, "0.5", "probability of erasing a box of an image"}.Range(0, 1))
          .Attr(AttrSchema{"scale", AttrType::kFloats, "[0.02, 0.33]", "range of the box's share of the area"}
                    .Range(0, 1)
                    .Count(2, 2))
          .Attr(
              AttrSchema{"ratio", AttrType::kFloats, "[0.3, 3.3]", "range of the box's height / width"}.Above(0).Count(
                  2, 2))
          .Attr(AttrSchema{"value", AttrType::kFloats, "0", "the box's value: one, or one per channel"})
          .Attr(AttrSchema{"random_value", AttrType::kBool, "false",
                           "standard normal noise instead of `value` (torchvision's value=\"random\"; float32)"})
          .Attr(LayoutAttr())
          .Input("field", "uint8 or float32 images [C,H,W], [H,W,C] or [H,W]")
          .Output("field", "the same")
          .Random()
          .Infer(InferErasing)));
  return registry->AddKernel<ErasingKernel>("random_erasing", Backend::kCpu);
}

}  // namespace sluice::ops
