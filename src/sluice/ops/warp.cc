#include "sluice/ops/warp.h"

#include <cmath>

namespace sluice::ops {
namespace {

inline int64_t ReflectIndex(int64_t i, int64_t n) {
  if (n == 1) return 0;
  while (i < 0 || i >= n) i = i < 0 ? -i - 1 : 2 * n - 1 - i;
  return i;
}

// The pixel index for coordinate i on an axis of n, or -1 for "use the fill".
inline int64_t BorderIndex(int64_t i, int64_t n, FillMode mode) {
  if (i >= 0 && i < n) return i;
  switch (mode) {
    case FillMode::kConstant:
      return -1;
    case FillMode::kNearest:
      return i < 0 ? 0 : n - 1;
    case FillMode::kReflect:
      return ReflectIndex(i, n);
  }
  return -1;
}

template <typename T, int kC>
void Warp(const WarpSpec& spec, const Affine& a, const T* src, T* dst) {
  const int64_t w = spec.dims.w, h = spec.dims.h;
  const int64_t c = kC > 0 ? kC : spec.dims.c;
  const int64_t stride = w * c;
  const float* m = a.m;
  for (int64_t y = 0; y < h; ++y) {
    const float bx = m[1] * y + m[2], by = m[4] * y + m[5];
    T* out = dst + y * stride;
    for (int64_t x = 0; x < w; ++x, out += c) {
      const float fx = m[0] * x + bx, fy = m[3] * x + by;
      const float flx = std::floor(fx), fly = std::floor(fy);
      const float ax = fx - flx, ay = fy - fly;
      const int64_t x0 = static_cast<int64_t>(flx), y0 = static_cast<int64_t>(fly);
      if (x0 >= 0 && y0 >= 0 && x0 + 1 < w && y0 + 1 < h) {  // interior: no border logic
        const T* p = src + y0 * stride + x0 * c;
        for (int64_t ch = 0; ch < c; ++ch) {
          const float top = p[ch] + ax * (static_cast<float>(p[ch + c]) - p[ch]);
          const float bottom =
              p[ch + stride] + ax * (static_cast<float>(p[ch + stride + c]) - p[ch + stride]);
          out[ch] = StoreAs<T>(top + ay * (bottom - top));
        }
        continue;
      }
      const int64_t xi[2] = {BorderIndex(x0, w, spec.fill_mode),
                             BorderIndex(x0 + 1, w, spec.fill_mode)};
      const int64_t yi[2] = {BorderIndex(y0, h, spec.fill_mode),
                             BorderIndex(y0 + 1, h, spec.fill_mode)};
      for (int64_t ch = 0; ch < c; ++ch) {
        auto at = [&](int j, int i) -> float {
          if (xi[i] < 0 || yi[j] < 0) return spec.fill_value;
          return src[yi[j] * stride + xi[i] * c + ch];
        };
        const float top = at(0, 0) + ax * (at(0, 1) - at(0, 0));
        const float bottom = at(1, 0) + ax * (at(1, 1) - at(1, 0));
        out[ch] = StoreAs<T>(top + ay * (bottom - top));
      }
    }
  }
}

template <typename T>
void WarpTyped(const WarpSpec& spec, const Affine& a, const T* src, T* dst) {
  // Fixed channel counts let the compiler unroll the channel loop.
  switch (spec.dims.c) {
    case 1:
      return Warp<T, 1>(spec, a, src, dst);
    case 3:
      return Warp<T, 3>(spec, a, src, dst);
    default:
      return Warp<T, 0>(spec, a, src, dst);
  }
}

class FusedWarpKernel : public Kernel {
 public:
  explicit FusedWarpKernel(std::vector<std::pair<std::shared_ptr<const WarpKernel>, uint64_t>> parts)
      : parts_(std::move(parts)) {}

  absl::Status Run(const TileContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    const WarpSpec& spec = parts_.front().first->spec();
    for (int64_t r = 0; r < ctx.rows; ++r) {
      Affine map;
      for (const auto& [part, op_key] : parts_) {
        SampleRng rng(ctx.seed, op_key, ctx.epoch, ctx.first_sample + r);
        map = Then(map, part->SampleMap(rng));
      }
      WarpAffine(spec, map, in[0].row<uint8_t>(r), out[0].row<uint8_t>(r));
    }
    return absl::OkStatus();
  }

 private:
  std::vector<std::pair<std::shared_ptr<const WarpKernel>, uint64_t>> parts_;
};

}  // namespace

Affine Then(const Affine& first, const Affine& second) {
  // first(second(p)): substitute second's output into first.
  const float* a = first.m;
  const float* b = second.m;
  Affine r;
  r.m[0] = a[0] * b[0] + a[1] * b[3];
  r.m[1] = a[0] * b[1] + a[1] * b[4];
  r.m[2] = a[0] * b[2] + a[1] * b[5] + a[2];
  r.m[3] = a[3] * b[0] + a[4] * b[3];
  r.m[4] = a[3] * b[1] + a[4] * b[4];
  r.m[5] = a[3] * b[2] + a[4] * b[5] + a[5];
  return r;
}

void WarpAffine(const WarpSpec& spec, const Affine& map, const uint8_t* src, uint8_t* dst) {
  if (spec.dtype == DType::kUInt8) return WarpTyped<uint8_t>(spec, map, src, dst);
  WarpTyped<float>(spec, map, reinterpret_cast<const float*>(src), reinterpret_cast<float*>(dst));
}

absl::Status WarpKernel::Run(const TileContext& ctx, absl::Span<const ColumnRef> in,
                             absl::Span<const ColumnRef> out) const {
  for (int64_t r = 0; r < ctx.rows; ++r) {
    SampleRng rng = ctx.Rng(r);
    WarpAffine(spec_, SampleMap(rng), in[0].row<uint8_t>(r), out[0].row<uint8_t>(r));
  }
  return absl::OkStatus();
}

std::shared_ptr<const Kernel> FuseWarps(
    std::vector<std::pair<std::shared_ptr<const WarpKernel>, uint64_t>> parts) {
  return std::make_shared<FusedWarpKernel>(std::move(parts));
}

bool CanFuse(const WarpSpec& a, const WarpSpec& b) {
  return a.dtype == b.dtype && a.dims.h == b.dims.h && a.dims.w == b.dims.w &&
         a.dims.c == b.dims.c && a.fill_mode == b.fill_mode && a.fill_value == b.fill_value;
}

}  // namespace sluice::ops
