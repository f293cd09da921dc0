// Neighbourhood filters on images: gaussian_blur and grey_dilation.
//
// Written by hand rather than calling OpenCV: on MNIST/CIFAR-sized images
// OpenCV's per-call setup dominates (GaussianBlur 11x11 on 28x28 float runs at
// ~167k images/s on one core here, below W1's target), and its uint8 blur
// takes a bit-exact fixed-point path 3-7x slower than float. Both filters
// are separable and run as two passes over contiguous rows of W*C values
// (row_kernels.h); uint8 images stay integers (16-bit fixed point to blur).
// Tests compare them with OpenCV.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/ops/border.h"
#include "sluice/ops/field.h"
#include "sluice/ops/image_filter.h"
#include "sluice/ops/op_registry.h"
#include "sluice/ops/row_kernels.h"
#include "sluice/ops/value_loops.h"

namespace sluice::ops {
namespace {

// Per-thread scratch of the values an image is held in while filtering (S:
// float for float images; for uint8 ones int16 fixed point to blur, uint8
// to dilate), grown once and reused for every image.
template <typename S>
struct Scratch {
  std::vector<S> padded;  // the image with horizontal borders
  std::vector<S> rows;    // after the horizontal pass
  std::vector<S> fill;    // one row of the fill value
  std::vector<uint8_t> bytes;  // uint8 rows with their borders, before they are held as S
  std::vector<const S*> in_ptrs, window;
  std::vector<S*> mid_ptrs;
  template <typename P>
  P* Get(std::vector<P>& v, size_t n) {
    if (v.size() < n) v.resize(n);
    return v.data();
  }
};
template <typename S>
Scratch<S>& ThreadScratch() {
  thread_local Scratch<S> s;
  return s;
}

// The row pointers of an image's output.
template <typename T>
T* const* OutputRows(T* dst, int64_t h, int64_t n) {
  thread_local std::vector<T*> rows;
  rows.resize(h);
  for (int64_t y = 0; y < h; ++y) rows[y] = dst + y * n;
  return rows.data();
}

// Where each value of a padded row's left and right border comes from: an
// index into the input row, or -1 for the fill. Flat over x and channel, so
// filling a border is one short loop of copies per row.
struct RowBorders {
  std::vector<int32_t> left, right;
  RowBorders(const std::vector<int32_t>& xmap, int64_t w, int64_t r, int64_t c) {
    auto from = [&](int64_t x, int64_t ch) { return xmap[x] < 0 ? -1 : static_cast<int32_t>(xmap[x] * c + ch); };
    for (int64_t x = 0; x < r; ++x) {
      for (int64_t ch = 0; ch < c; ++ch) left.push_back(from(x, ch));
    }
    for (int64_t x = r + w; x < 2 * r + w; ++x) {
      for (int64_t ch = 0; ch < c; ++ch) right.push_back(from(x, ch));
    }
  }
};

// A separable filter's geometry: the image and the border maps of both axes.
struct FilterShape {
  ImageDims dims;
  int64_t kh, kw;
  std::vector<int32_t> ymap;  // BorderMap of the vertical axis
  RowBorders borders;         // the horizontal axis's, per row
  // The same borders as byte shuffles, where a uint8 row's come from its
  // first and last 16 bytes (small kernels on rows of 16 bytes or more).
  std::optional<BorderShuffle> shuffle;
  FilterShape(ImageDims d, int64_t kh, int64_t kw, bool reflect)
      : dims(d), kh(kh), kw(kw), ymap(BorderMap(d.h, kh / 2, reflect)),
        borders(BorderMap(d.w, kw / 2, reflect), d.w, kw / 2, d.c), shuffle(ShuffleOf(borders, d.row_elems())) {}

  static std::optional<BorderShuffle> ShuffleOf(const RowBorders& b, int64_t n) {
    if (n < 16 || b.left.size() > 16 || b.right.size() > 16) return std::nullopt;
    BorderShuffle s{};
    s.left_count = static_cast<int64_t>(b.left.size());
    s.right_count = static_cast<int64_t>(b.right.size());
    for (size_t i = 0; i < b.left.size(); ++i) {
      if (b.left[i] >= 16) return std::nullopt;
      s.left[i] = b.left[i] < 0 ? 0x80 : static_cast<uint8_t>(b.left[i]);
    }
    for (size_t i = 0; i < b.right.size(); ++i) {
      if (b.right[i] >= 0 && b.right[i] < n - 16) return std::nullopt;
      s.right[i] = b.right[i] < 0 ? 0x80 : static_cast<uint8_t>(b.right[i] - (n - 16));
    }
    return s;
  }
};

// out[i] = row[from[i]], or `fill` where from[i] < 0.
template <typename S>
void FillBorder(const S* row, const std::vector<int32_t>& from, S fill, S* out) {
  for (size_t i = 0; i < from.size(); ++i) out[i] = from[i] < 0 ? fill : row[from[i]];
}

// Holds the rows of `src` as S with horizontal borders, `stride` apart.
template <typename S, typename T>
void HoldRows(const T* src, const FilterShape& f, S fill, S* padded, int64_t stride, Scratch<S>& s) {
  const ImageDims& d = f.dims;
  const int64_t n = d.row_elems(), c = d.c, rx = f.kw / 2;
  if constexpr (std::is_same_v<T, uint8_t>) {
    if (f.shuffle && fill == S{0}) {  // the shuffle's 0 is the fill (uint8's lowest; the blur has none)
      if constexpr (std::is_same_v<S, uint8_t>) {
        PadRows(src, d.h, n, *f.shuffle, padded, stride);
      } else {
        uint8_t* bytes = s.Get(s.bytes, d.h * stride);
        PadRows(src, d.h, n, *f.shuffle, bytes, stride);
        U8ToFixed(bytes, d.h * stride, padded);
      }
      return;
    }
  }
  for (int64_t y = 0; y < d.h; ++y) {
    const T* in = src + y * n;
    S* p = padded + y * stride;
    if constexpr (std::is_same_v<S, T>) {
      std::copy(in, in + n, p + rx * c);
    } else {
      U8ToFixed(in, n, p + rx * c);
    }
  }
  // The borders once every row's interior is held: loads of values stored
  // just before stalled on store forwarding.
  for (int64_t y = 0; y < d.h; ++y) {
    S* p = padded + y * stride;
    FillBorder(p + rx * c, f.borders.left, fill, p);
    FillBorder(p + rx * c, f.borders.right, fill, p + (rx + d.w) * c);
  }
}

// Holds `src` as S with horizontal borders, and sets up the row pointers of
// both passes. Rows are spaced with kRowSlackBytes to spare (the integer
// passes read and write whole vectors past a row's end).
template <typename S, typename T>
void Prepare(const T* src, const FilterShape& f, S fill, Scratch<S>& s) {
  const ImageDims& d = f.dims;
  const int64_t slack = kRowSlackBytes / static_cast<int64_t>(sizeof(S));
  const int64_t padded_row = (d.w + f.kw - 1) * d.c + slack, mid_row = d.row_elems() + slack;
  S* padded = s.Get(s.padded, d.h * padded_row);
  S* rows = s.Get(s.rows, d.h * mid_row);
  S* fill_row = s.Get(s.fill, mid_row);
  // Only a constant border reads rows of the fill (its first row is outside).
  if (f.ymap.front() < 0) std::fill(fill_row, fill_row + mid_row, fill);
  const S** in_ptrs = s.Get(s.in_ptrs, d.h);
  S** mid_ptrs = s.Get(s.mid_ptrs, d.h);
  const S** window = s.Get(s.window, d.h + f.kh - 1);
  for (int64_t y = 0; y < d.h; ++y) {
    in_ptrs[y] = padded + y * padded_row;
    mid_ptrs[y] = rows + y * mid_row;
  }
  for (int64_t t = 0; t < d.h + f.kh - 1; ++t) {
    window[t] = f.ymap[t] < 0 ? fill_row : rows + f.ymap[t] * mid_row;
  }
  HoldRows(src, f, fill, padded, padded_row, s);
}

// Taps below this weight (of a kernel summing to 1) change no output by a
// float32 rounding step: the passes skip them. A small sigma leaves few
// taps of an 11-tap kernel (sigma 0.5: 7; 0.1: 1).
constexpr float kNegligibleTap = 1e-9f;

// How many taps at each end of a symmetric kernel are negligible: in fixed
// point, those that round to 0.
bool Negligible(float w) { return w < kNegligibleTap; }
bool Negligible(int16_t w) { return w == 0; }
template <typename W>
int64_t NegligibleEnds(const W* w, int64_t k) {
  int64_t n = 0;
  while (2 * n + 1 < k && Negligible(w[n])) ++n;
  return n;
}

// Q15 taps of a symmetric kernel, rounded; the centre takes what rounding
// lost, so that they sum to 32768 (but for a single tap of 1, held as 32767).
void FixedTaps(const float* w, int64_t k, int16_t* q) {
  int32_t sum = 0;
  for (int64_t i = 0; i < k; ++i) {
    q[i] = static_cast<int16_t>(std::min<long>(std::lround(w[i] * 32768.f), 32767));
    sum += q[i];
  }
  q[k / 2] = static_cast<int16_t>(std::clamp<int32_t>(q[k / 2] + 32768 - sum, 0, 32767));
}

// Blurs a uint8 image in fixed point with Q15 taps.
void BlurFixedImage(const uint8_t* src, uint8_t* dst, const FilterShape& f, const int16_t* wx, const int16_t* wy) {
  const ImageDims& d = f.dims;
  Scratch<int16_t>& s = ThreadScratch<int16_t>();
  Prepare<int16_t>(src, f, 0, s);
  const int64_t skip_x = NegligibleEnds(wx, f.kw), skip_y = NegligibleEnds(wy, f.kh);
  if (skip_x > 0) {
    for (int64_t y = 0; y < d.h; ++y) s.in_ptrs[y] += skip_x * d.c;
  }
  ConvolveRows(s.in_ptrs.data(), s.mid_ptrs.data(), d.h, d.row_elems(), d.c, wx + skip_x, f.kw - 2 * skip_x);
  WeightedSumRows(s.window.data() + skip_y, OutputRows(dst, d.h, d.row_elems()), d.h, d.row_elems(), wy + skip_y,
                  f.kh - 2 * skip_y);
}

// Blurs a float image. The horizontal pass writes its rows, in whole
// vectors, into one flat buffer that also holds the rows of the vertical
// borders (copied in after): the vertical pass is then one run of vectors
// over the whole image.
void BlurFloatImage(const float* src, float* dst, const FilterShape& f, const float* wx, const float* wy) {
  const ImageDims& d = f.dims;
  const int64_t n = d.row_elems(), slack = kRowSlackBytes / static_cast<int64_t>(sizeof(float));
  Scratch<float>& s = ThreadScratch<float>();
  const int64_t padded_row = (d.w + f.kw - 1) * d.c + slack;
  float* padded = s.Get(s.padded, d.h * padded_row);
  const std::vector<int32_t>& left = f.borders.left;
  const std::vector<int32_t>& right = f.borders.right;
  PadRows(src, d.h, n, left.data(), static_cast<int64_t>(left.size()), right.data(),
          static_cast<int64_t>(right.size()), padded, padded_row);
  const int64_t skip_x = NegligibleEnds(wx, f.kw), skip_y = NegligibleEnds(wy, f.kh);
  const int64_t kx = f.kw - 2 * skip_x, ky = f.kh - 2 * skip_y, ry = ky / 2;
  float* rows = s.Get(s.rows, (d.h + ky - 1) * n + slack);  // image row y is row ry + y
  ConvolveRows(padded + skip_x * d.c, padded_row, rows + ry * n, n, d.h, n, d.c, wx + skip_x, kx,
               /*exact_end=*/false);
  // f.ymap[t] is the row read at y = t - kh / 2, and kh / 2 = ry + skip_y.
  for (int64_t t = 0; t < ry; ++t) {
    const int64_t below = ry + d.h + t;
    std::copy_n(rows + (ry + f.ymap[skip_y + t]) * n, n, rows + t * n);
    std::copy_n(rows + (ry + f.ymap[skip_y + below]) * n, n, rows + below * n);
  }
  ConvolveRows(rows, 0, dst, 0, 1, d.h * n, n, wy + skip_y, ky, /*exact_end=*/true);
}

// Dilates one image as its own type: the max is exact in any.
template <typename T>
void DilateImage(const T* src, T* dst, const FilterShape& f) {
  const ImageDims& d = f.dims;
  Scratch<T>& s = ThreadScratch<T>();
  // Pixels outside the image never win the max: they hold the lowest value.
  Prepare<T>(src, f, std::numeric_limits<T>::lowest(), s);
  MaxRows(s.in_ptrs.data(), s.mid_ptrs.data(), d.h, d.row_elems(), d.c, f.kw);
  MaxWindowRows(s.window.data(), OutputRows(dst, d.h, d.row_elems()), d.h, d.row_elems(), f.kh);
}

// A blur's taps for both axes, x's then y's: float, and Q15 for uint8 images.
struct BlurTaps {
  int64_t kw = 0, kh = 0;
  std::vector<float> w;
  std::vector<int16_t> q;
  void Compute(int64_t kw_, int64_t kh_, float sigma, bool fixed_point) {
    kw = kw_, kh = kh_;
    w.resize(kw + kh);
    GaussianTaps(kw, sigma, w.data());
    if (kh == kw) {  // one sigma for both axes, as torchvision: the same taps
      std::copy(w.begin(), w.begin() + kw, w.begin() + kw);
    } else {
      GaussianTaps(kh, sigma, w.data() + kw);
    }
    if (!fixed_point) return;
    q.resize(kw + kh);
    FixedTaps(w.data(), kw, q.data());
    FixedTaps(w.data() + kw, kh, q.data() + kw);
  }
  // Drops each axis's negligible end taps, so that the filter's borders
  // narrow with them (W2's 11 taps at sigma 0.8 are 7 in Q15).
  void Trim(bool fixed_point) {
    const int64_t sx = fixed_point ? NegligibleEnds(q.data(), kw) : NegligibleEnds(w.data(), kw);
    const int64_t sy = fixed_point ? NegligibleEnds(q.data() + kw, kh) : NegligibleEnds(w.data() + kw, kh);
    auto cut = [&](auto& v) {
      if (v.empty()) return;
      std::remove_reference_t<decltype(v)> kept(v.begin() + sx, v.begin() + kw - sx);
      kept.insert(kept.end(), v.begin() + kw + sy, v.begin() + kw + kh - sy);
      v = std::move(kept);
    };
    cut(w);
    cut(q);
    kw -= 2 * sx, kh -= 2 * sy;
  }
};

class GaussianBlurKernel : public Kernel {
 public:
  using Params = FilterParams;
  explicit GaussianBlurKernel(const Params& p)
      : dtype_(p.dtype), sigma_lo_(p.sigma_lo), sigma_hi_(p.sigma_hi), fixed_(FixedSigmaTaps(p)),
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

std::vector<int32_t> BorderMap(int64_t n, int64_t r, bool reflect) {
  std::vector<int32_t> map(n + 2 * r);
  for (int64_t i = -r; i < n + r; ++i) {
    map[i + r] = static_cast<int32_t>(BorderIndex(i, n, reflect ? PadMode::kReflect : PadMode::kConstant));
  }
  return map;
}

void GaussianTaps(int64_t k, float sigma, float* taps) {
  const double half = (k - 1) / 2.0;
  // Symmetric: taps i and k-1-i have the same |x|, so the same value; half
  // the exponentials (a per-sample sigma computes them for every image).
  for (int64_t i = 0; i <= (k - 1) / 2; ++i) {
    const double x = (i - half) / sigma;
    taps[i] = taps[k - 1 - i] = static_cast<float>(std::exp(-0.5 * x * x));
  }
  double sum = 0;
  for (int64_t i = 0; i < k; ++i) sum += taps[i];
  for (int64_t i = 0; i < k; ++i) taps[i] = static_cast<float>(taps[i] / sum);
}

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
