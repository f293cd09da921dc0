// pad and random_crop (torchvision's Pad and RandomCrop): one kernel cuts a
// window out of the image as padded, reading the padding through index maps
// so that the padded image is never made.
#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/kernels/border.h"
#include "sluice/ops/builtin_ops.h"
#include "sluice/ops/crop_window.h"
#include "sluice/ops/field.h"
#include "sluice/ops/op_registry.h"

namespace sluice::ops {
namespace {

using kernels::BorderIndex;
using kernels::PadMode;

// Padding of the four sides, torchvision's order of a 4-list.
struct Sides {
  int64_t left = 0, top = 0, right = 0, bottom = 0;
};

// One axis of the image as padded (by up to two pads in turn, as RandomCrop
// pads by `padding` and then again where pad_if_needed): for each padded
// position, the input position it reads, or -1 for the fill.
struct AxisMap {
  std::vector<int32_t> from;
  // [lo, hi): the padded positions that read lo - offset .. in order, where
  // runs of pixels can be copied whole.
  int64_t lo = 0, hi = 0;

  // `n` input positions padded by (before1, after1), then by (before2, after2).
  AxisMap(int64_t n, int64_t before1, int64_t after1, int64_t before2, int64_t after2, PadMode mode) {
    const int64_t n1 = n + before1 + after1;
    from.resize(n1 + before2 + after2);
    for (int64_t i = 0; i < static_cast<int64_t>(from.size()); ++i) {
      const int64_t in1 = BorderIndex(i - before2, n1, mode);
      from[i] = static_cast<int32_t>(in1 < 0 ? -1 : BorderIndex(in1 - before1, n, mode));
    }
    lo = before1 + before2;
    hi = lo + n;
  }
  int64_t size() const { return static_cast<int64_t>(from.size()); }
};

// Copies a row's run of input pixels. A run is short (CIFAR's rows are 96
// bytes), where a call of libc's memcpy costs more than its copy: 32-byte
// moves the compiler inlines, the last one overlapping; long runs go to
// libc's copy.
inline void CopyRun(uint8_t* dst, const uint8_t* src, int64_t n) {
  constexpr int64_t kMove = 32, kLong = 512;
  if (n < kMove || n > kLong) {
    std::memcpy(dst, src, static_cast<size_t>(n));
    return;
  }
  for (int64_t i = 0; i + kMove < n; i += kMove) std::memcpy(dst + i, src + i, kMove);
  std::memcpy(dst + n - kMove, src + n - kMove, kMove);
}

struct PadCropParams {
  ImageDims in;
  int64_t pixel_bytes;
  AxisMap ys, xs;
  int64_t out_h, out_w;
  bool random;                // a window drawn per sample, else the whole padded image
  std::vector<uint8_t> fill;  // one pixel of the fill value, in the column's dtype
};

class PadCropKernel : public Kernel {
 public:
  using Params = PadCropParams;
  explicit PadCropKernel(const Params& p) : p_(p) {}

  absl::Status Run(const KernelContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    for (int64_t r = 0; r < ctx.rows; ++r) {
      int64_t top = 0, left = 0;
      if (p_.random) {
        // RandomCrop.get_params: top, then left, each uniform over the places the window fits.
        SampleRng rng = ctx.Rng(r);
        top = rng.NextU32() % static_cast<uint32_t>(p_.ys.size() - p_.out_h + 1);
        left = rng.NextU32() % static_cast<uint32_t>(p_.xs.size() - p_.out_w + 1);
      }
      const uint8_t* src = in[0].row<const uint8_t>(r);
      uint8_t* dst = out[0].row<uint8_t>(r);
      // The pixel's size known when compiling: the padding's copies inline.
      switch (p_.pixel_bytes) {
        case 1:
          Cut<1>(src, top, left, dst);
          break;
        case 3:
          Cut<3>(src, top, left, dst);
          break;
        case 4:
          Cut<4>(src, top, left, dst);
          break;
        case 12:
          Cut<12>(src, top, left, dst);
          break;
        default:
          Cut<0>(src, top, left, dst);
      }
    }
    return absl::OkStatus();
  }

 private:
  // kPx: the pixel's bytes, or 0 for p_.pixel_bytes.
  template <int64_t kPx>
  void Cut(const uint8_t* src, int64_t top, int64_t left, uint8_t* dst) const {
    const int64_t px = kPx > 0 ? kPx : p_.pixel_bytes, src_row = p_.in.w * px, dst_row = p_.out_w * px;
    const int32_t* xs = p_.xs.from.data() + left;
    // Columns [copy_lo, copy_hi) of the window are input columns in order:
    // one copy per row; the others (the padding) go pixel by pixel.
    const int64_t copy_lo = std::clamp(p_.xs.lo - left, int64_t{0}, p_.out_w);
    const int64_t copy_hi = std::clamp(p_.xs.hi - left, copy_lo, p_.out_w);
    for (int64_t y = 0; y < p_.out_h; ++y, dst += dst_row) {
      const int32_t sy = p_.ys.from[top + y];
      const uint8_t* row = sy < 0 ? nullptr : src + sy * src_row;
      auto pixels = [&](int64_t x0, int64_t x1) {
        for (int64_t x = x0; x < x1; ++x) {
          std::memcpy(dst + x * px, row == nullptr || xs[x] < 0 ? p_.fill.data() : row + xs[x] * px, px);
        }
      };
      if (row == nullptr) {
        pixels(0, p_.out_w);
        continue;
      }
      pixels(0, copy_lo);
      if (copy_hi > copy_lo) CopyRun(dst + copy_lo * px, row + xs[copy_lo] * px, (copy_hi - copy_lo) * px);
      pixels(copy_hi, p_.out_w);
    }
  }

  const Params p_;
};

AttrSchema PaddingAttr(const char* default_json, const char* doc) {
  return AttrSchema{"padding", AttrType::kInts, default_json, doc}.AtLeast(0).Count(0, 4);
}
AttrSchema PaddingModeAttr() {
  return AttrSchema{"padding_mode", AttrType::kString, "\"constant\"",
                    "constant (fill), edge (aa|ab), reflect (cb|abc, the edge not repeated) or symmetric "
                    "(ba|ab)"}
      .OneOf({"constant", "edge", "reflect", "symmetric"});
}

// torchvision's padding: p (all sides), [left/right, top/bottom] or [left, top, right, bottom].
absl::StatusOr<Sides> ParseSides(const std::vector<int64_t>& p) {
  switch (p.size()) {
    case 0:
      return Sides{};
    case 1:
      return Sides{p[0], p[0], p[0], p[0]};
    case 2:
      return Sides{p[0], p[1], p[0], p[1]};
    case 4:
      return Sides{p[0], p[1], p[2], p[3]};
  }
  return AttrError("padding", "must be p (every side), [left/right, top/bottom] or [left, top, right, bottom]");
}

PadMode ParsePadMode(const std::string& mode) {  // one of PaddingModeAttr's choices
  if (mode == "edge") return PadMode::kEdge;
  if (mode == "reflect") return PadMode::kReflect;
  if (mode == "symmetric") return PadMode::kSymmetric;
  return PadMode::kConstant;
}

// The image as padded has at most kMostPadded pixels a side: its index
// maps hold an int32 per position, and a padding of 2e9 took 24 GB making
// them before any check of the output's size.
constexpr int64_t kMostPadded = int64_t{1} << 24;

absl::Status CheckPaddedSize(const ImageDims& d, const Sides& pad, const Sides& extra) {
  for (int64_t side : {pad.left, pad.top, pad.right, pad.bottom, extra.left, extra.top, extra.right, extra.bottom}) {
    if (side > kMostPadded) {
      return AttrError("padding", absl::StrCat("pads a side by ", side, " pixels; at most ", kMostPadded));
    }
  }
  const int64_t h = d.h + pad.top + pad.bottom + extra.top + extra.bottom;
  const int64_t w = d.w + pad.left + pad.right + extra.left + extra.right;
  if (h > kMostPadded || w > kMostPadded) {
    return AttrError("padding", absl::StrCat("makes the image ", h, " x ", w, " as padded; at most ", kMostPadded,
                                             " pixels a side"));
  }
  return absl::OkStatus();
}

// The image column named by "field", padded by `pad`, then by `extra`; a
// window of out_h x out_w of it (random), or all of it.
absl::StatusOr<InferredOp> InferPadCrop(const Attrs& attrs, const Schema& schema, Sides pad, Sides extra, int64_t out_h,
                                        int64_t out_w, bool random) {
  SLUICE_ASSIGN_OR_RETURN(BoundField f, BindField(attrs, schema, {DType::kUInt8, DType::kFloat32}));
  SLUICE_ASSIGN_OR_RETURN(ImageDims d, ImageDimsOf(f.spec));
  SLUICE_ASSIGN_OR_RETURN(std::vector<uint8_t> fill, FillPixel(attrs.GetFloats("fill"), f.spec.dtype, d.c));
  SLUICE_RETURN_IF_ERROR(CheckPaddedSize(d, pad, extra));
  const PadMode mode = ParsePadMode(attrs.GetString("padding_mode"));
  PadCropParams p{d,
                  static_cast<int64_t>(d.c * DTypeSize(f.spec.dtype)),
                  AxisMap(d.h, pad.top, pad.bottom, extra.top, extra.bottom, mode),
                  AxisMap(d.w, pad.left, pad.right, extra.left, extra.right, mode),
                  out_h < 0 ? 0 : out_h,
                  out_w < 0 ? 0 : out_w,
                  random,
                  std::move(fill)};
  if (!random) {
    p.out_h = p.ys.size();
    p.out_w = p.xs.size();
  } else if (p.out_h > p.ys.size() || p.out_w > p.xs.size()) {
    return AttrError("size", absl::StrCat("[", p.out_h, ", ", p.out_w, "] is larger than the image as padded, [",
                                          p.ys.size(), ", ", p.xs.size(), "] (", f.spec.shape.ToString(),
                                          " before padding); pad more, or set pad_if_needed"));
  }
  ColumnSpec out = f.spec;
  out.shape = f.spec.shape.rank() == 2 ? Shape{p.out_h, p.out_w} : Shape{p.out_h, p.out_w, d.c};
  InferredOp op = UnaryOp(f.column, out, std::move(p));
  op.random = random;
  return op;
}

absl::StatusOr<InferredOp> InferPad(const Attrs& attrs, const Schema& schema) {
  SLUICE_ASSIGN_OR_RETURN(Sides pad, ParseSides(attrs.GetInts("padding")));
  return InferPadCrop(attrs, schema, pad, Sides{}, -1, -1, false);
}

absl::StatusOr<InferredOp> InferRandomCrop(const Attrs& attrs, const Schema& schema) {
  SLUICE_ASSIGN_OR_RETURN(Sides pad, ParseSides(attrs.GetInts("padding")));
  const auto [h, w] = ImageSize(attrs, "size");
  Sides extra;
  if (attrs.GetBool("pad_if_needed")) {
    // RandomCrop pads a side short of the size by the shortfall on both ends.
    SLUICE_ASSIGN_OR_RETURN(BoundField f, BindField(attrs, schema, {DType::kUInt8, DType::kFloat32}));
    SLUICE_ASSIGN_OR_RETURN(ImageDims d, ImageDimsOf(f.spec));
    const int64_t padded_h = d.h + pad.top + pad.bottom, padded_w = d.w + pad.left + pad.right;
    if (padded_w < w) extra.left = extra.right = w - padded_w;
    if (padded_h < h) extra.top = extra.bottom = h - padded_h;
  }
  return InferPadCrop(attrs, schema, pad, extra, h, w, true);
}

}  // namespace

absl::Status RegisterPadCropOps(OpRegistry* registry) {
  const char* kImage = "uint8 or float32 image [H,W] or [H,W,C]";
  SLUICE_RETURN_IF_ERROR(registry->AddOp(
      OpSchema("pad")
          .Doc("Pads each image on its four sides (torchvision's Pad).")
          .Attr(FieldAttr())
          .Attr(PaddingAttr("", "p (every side), [left/right, top/bottom] or [left, top, right, bottom]"))
          .Attr(FillAttr("the value of padding_mode \"constant\""))
          .Attr(PaddingModeAttr())
          .Input("field", kImage)
          .Output("field", "[H + top + bottom, W + left + right(, C)], the same dtype")
          .Infer(InferPad)));
  SLUICE_RETURN_IF_ERROR(registry->AddKernel<PadCropKernel>("pad", Backend::kCpu));
  SLUICE_RETURN_IF_ERROR(registry->AddOp(
      OpSchema("random_crop")
          .Doc("A window of `size` at a uniformly drawn place in each image, padded first by `padding` "
               "(torchvision's RandomCrop; CIFAR's padding 4 and size 32). The padded image is never made: "
               "the window reads the padding where it overlaps it.")
          .Attr(FieldAttr())
          .Attr(ImageSizeAttr("size", ""))
          .Attr(PaddingAttr("[]",
                            "before the crop: none, p (every side), [left/right, top/bottom] or "
                            "[left, top, right, bottom]"))
          .Attr(AttrSchema{"pad_if_needed", AttrType::kBool, "false",
                           "pad a side shorter than `size` by the shortfall on both ends, rather than fail"})
          .Attr(FillAttr("the value of padding_mode \"constant\""))
          .Attr(PaddingModeAttr())
          .Input("field", kImage)
          .Output("field", "[height, width(, C)], the same dtype")
          .Random()
          .Infer(InferRandomCrop)));
  return registry->AddKernel<PadCropKernel>("random_crop", Backend::kCpu);
}

}  // namespace sluice::ops
