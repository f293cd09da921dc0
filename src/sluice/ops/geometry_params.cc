// What each warp draws per sample, and which ops the graph fuses.
#include "sluice/ops/geometry_params.h"

#include <cmath>

#include "sluice/kernels/image_adjust.h"
#include "sluice/ops/python_round.h"

namespace sluice::ops {
namespace {

using kernels::Affine;
using kernels::AffineArgs;
using kernels::FromCentred;
using kernels::InverseAffineMatrix;
using kernels::PerspectiveMap;
using kernels::WarpSpec;

constexpr double kPi = 3.14159265358979323846;

}  // namespace

Affine SampleMap(const WarpPart& part, const ImageDims& dims, SampleRng& rng) {
  const double cx = (dims.w - 1) / 2.0, cy = (dims.h - 1) / 2.0;
  Affine a;
  switch (part.kind) {
    case WarpPart::Kind::kFlip: {
      const bool draw_h = rng.Bernoulli(part.p);
      const bool draw_v = rng.Bernoulli(part.p);
      if (part.horizontal && draw_h) a.m[0] = -1, a.m[2] = static_cast<float>(dims.w - 1);
      if (part.vertical && draw_v) a.m[4] = -1, a.m[5] = static_cast<float>(dims.h - 1);
      break;
    }
    case WarpPart::Kind::kRotation: {  // about the image centre
      const double theta = rng.Uniform(part.lo, part.hi) * kPi / 180.0;
      const double c = std::cos(theta), s = std::sin(theta);
      a.m[0] = static_cast<float>(c);
      a.m[1] = static_cast<float>(-s);
      a.m[2] = static_cast<float>(cx - c * cx + s * cy);
      a.m[3] = static_cast<float>(s);
      a.m[4] = static_cast<float>(c);
      a.m[5] = static_cast<float>(cy - s * cx - c * cy);
      break;
    }
    case WarpPart::Kind::kAffine: {
      // RandomAffine.get_params, then F.affine on tensors: the inverse of
      // rotation, scale and shear about the centre, then the shift, from
      // _get_inverse_affine_matrix.
      const double angle = rng.Uniform(part.lo, part.hi);
      const double tx = PythonRound(rng.Uniform(-part.translate_x, part.translate_x) * dims.w);
      const double ty = PythonRound(rng.Uniform(-part.translate_y, part.translate_y) * dims.h);
      const double scale = rng.Uniform(part.scale_lo, part.scale_hi);
      AffineArgs args;
      args.angle = angle, args.translate_x = tx, args.translate_y = ty, args.scale = scale;
      args.shear_x = rng.Uniform(part.shear_x_lo, part.shear_x_hi);
      args.shear_y = rng.Uniform(part.shear_y_lo, part.shear_y_hi);
      double m[6];
      InverseAffineMatrix(args, m);
      a = FromCentred(m, dims);
      break;
    }
    case WarpPart::Kind::kPerspective: {
      // RandomPerspective: the coin, then get_params' eight corner
      // coordinates (drawn whether or not it applies, so every sample
      // draws as many).
      const bool apply = rng.Bernoulli(part.p);
      const int w = static_cast<int>(dims.w), h = static_cast<int>(dims.h);
      const int dx = static_cast<int>(part.distortion * (w / 2)), dy = static_cast<int>(part.distortion * (h / 2));
      auto draw = [&](int lo, int hi) {  // torch.randint(lo, hi): [lo, hi)
        return lo + static_cast<int>(rng.NextU32() % static_cast<uint32_t>(hi - lo));
      };
      const int corners[8] = {draw(0, dx + 1),     draw(0, dy + 1),       // top-left
                              draw(w - dx - 1, w), draw(0, dy + 1),       // top-right
                              draw(w - dx - 1, w), draw(h - dy - 1, h),   // bottom-right
                              draw(0, dx + 1),     draw(h - dy - 1, h)};  // bottom-left
      if (apply) a = PerspectiveMap(corners, dims);
      break;
    }
    case WarpPart::Kind::kZoom: {  // magnification about the centre
      const double inv = 1.0 / rng.Uniform(part.lo, part.hi);
      a.m[0] = a.m[4] = static_cast<float>(inv);
      a.m[2] = static_cast<float>(cx - cx * inv);
      a.m[5] = static_cast<float>(cy - cy * inv);
      break;
    }
  }
  return a;
}

bool IsWarpOp(const std::string& op) { return op == "random_flip" || IsResamplingWarpOp(op); }

bool IsResamplingWarpOp(const std::string& op) {
  return op == "random_rotation" || op == "random_zoom" || op == "random_affine" || op == "random_perspective";
}

bool CanFuse(const WarpSpec& a, const WarpSpec& b) {
  return a.dtype == b.dtype && a.dims.h == b.dims.h && a.dims.w == b.dims.w && a.dims.c == b.dims.c &&
         a.fill_mode == b.fill_mode && a.fill_value == b.fill_value && a.chw_out == b.chw_out;
}

}  // namespace sluice::ops
