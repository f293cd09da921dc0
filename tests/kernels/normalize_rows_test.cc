// A row normalized into CHW float32 is a * level + b per channel (one fused
// multiply-add), mirrored on request; the planes path gives the same values.
#include "sluice/kernels/normalize_rows.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "sluice/kernels/simd.h"
#include "status_matchers.h"

namespace sluice::kernels {
namespace {

TEST(NormalizeRow, WritesAPlanePerChannelMirroredOrNot) {
  const int64_t w = 37, c = 3;  // a width past every SIMD width, with a tail
  NormalizeLayout l{2, w, c, DType::kFloat32, /*chw=*/true, {0.5f, 2.f, -1.f}, {1.f, 0.f, 3.f}};
  std::vector<uint8_t> row(w * c);
  for (size_t i = 0; i < row.size(); ++i) row[i] = static_cast<uint8_t>(i * 7);
  for (bool mirror : {false, true}) {
    std::vector<float> out(2 * w * c, -99);
    NormalizeRow(l, row.data(), /*y=*/1, mirror, reinterpret_cast<uint8_t*>(out.data()));
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t x = 0; x < w; ++x) {
        const int64_t from = mirror ? w - 1 - x : x;
        const float want = std::fma(l.a[ch], static_cast<float>(row[from * c + ch]), l.b[ch]);
        ASSERT_EQ(out[(ch * 2 + 1) * w + x], want) << ch << "," << x << (mirror ? " mirrored" : "");
        ASSERT_EQ(out[(ch * 2) * w + x], -99);  // row 0 untouched
      }
  }
}

TEST(NormalizeRows, AnImageInOneCallEqualsItsRowsOneByOne) {
  const int64_t h = 5, w = 37, c = 3, stride = w * c + 7;  // rows apart by more than a row
  std::vector<uint8_t> image(h * stride);
  for (size_t i = 0; i < image.size(); ++i) image[i] = static_cast<uint8_t>(i * 11 + 3);
  for (DType out : {DType::kFloat32, DType::kFloat16, DType::kUInt8}) {
    for (bool chw : {true, false}) {
      NormalizeLayout l{h, w, c, out, chw, {0.5f, 2.f, -1.f}, {1.f, 0.f, 3.f}};
      if (out == DType::kUInt8) l.a = {1.f, 1.f, 1.f}, l.b = {0.f, 0.f, 0.f};
      const size_t bytes = static_cast<size_t>(h * w * c) * DTypeSize(out);
      for (bool mirror : {false, true}) {
        std::vector<uint8_t> whole(bytes, 0xAB), by_row(bytes, 0xAB);
        // Rows 1..3 of the image, in one call and row by row.
        NormalizeRows(l, image.data() + stride, stride, /*y0=*/1, /*n=*/3, mirror, whole.data());
        for (int64_t y = 1; y < 4; ++y) NormalizeRow(l, image.data() + y * stride, y, mirror, by_row.data());
        ASSERT_EQ(whole, by_row) << DTypeName(out) << (chw ? " CHW" : " HWC") << (mirror ? " mirrored" : "");
        // The same bytes from every SIMD path down to the plain loop (SSE4).
        for (const char* cap : {"avx2", "sse4"}) {
          if (!LimitSimd(cap).ok()) continue;
          std::vector<uint8_t> capped(bytes, 0xAB);
          NormalizeRows(l, image.data() + stride, stride, 1, 3, mirror, capped.data());
          SLUICE_ASSERT_OK(LimitSimd("best"));
          ASSERT_EQ(whole, capped) << cap << " " << DTypeName(out) << (chw ? " CHW" : " HWC")
                                   << (mirror ? " mirrored" : "");
        }
        EXPECT_EQ(whole[chw ? 0 : bytes - 1], 0xAB);  // rows 0 and 4 untouched
        if (out != DType::kFloat32 || !chw) continue;
        const float* v = reinterpret_cast<const float*>(whole.data());
        EXPECT_EQ(v[(2 * h + 3) * w + 0], std::fma(l.a[2], image[3 * stride + (mirror ? w - 1 : 0) * c + 2], l.b[2]));
      }
    }
  }
}

TEST(NormalizePlanes, GivesRowsValues) {
  const int64_t w = 19, c = 3;
  NormalizeLayout l{1, w, c, DType::kFloat32, /*chw=*/true, {0.25f, 0.5f, 0.75f}, {-1.f, 0.f, 1.f}};
  std::vector<uint8_t> row(w * c);
  std::vector<int16_t> planes(w * c);
  for (int64_t x = 0; x < w; ++x)
    for (int64_t ch = 0; ch < c; ++ch)
      row[x * c + ch] = static_cast<uint8_t>(x * 13 + ch * 50), planes[ch * w + x] = row[x * c + ch];
  std::vector<float> a(w * c), b(w * c);
  NormalizeRow(l, row.data(), 0, true, reinterpret_cast<uint8_t*>(a.data()));
  NormalizePlanes(l, planes.data(), w, 0, true, reinterpret_cast<uint8_t*>(b.data()));
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace sluice::kernels
