// One build, every SIMD target: the dispatched kernels run on each target
// the CPU has (capped with LimitSimd, as SLUICE_SIMD does) and give the same
// values on all of them.
#include "sluice/kernels/simd.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "op_harness.h"
#include "sluice/kernels/layout.h"
#include "sluice/kernels/resample.h"
#include "sluice/kernels/row_kernels.h"
#include "sluice/ops/normalize_params.h"
#include "status_matchers.h"

namespace sluice::ops {
namespace {

using kernels::BorderShuffle;
using kernels::ConvolveRows;
using kernels::HwcToChw;
using kernels::kFixedValueShift;
using kernels::kRowSlackBytes;
using kernels::LimitSimd;
using kernels::PadRows;
using kernels::ResampleBilinear;
using kernels::ResampleBilinearPlanes;
using kernels::SimdTarget;
using kernels::WeightedSumRows;
using kernels::Window;

using ::sluice::testing::StatusIs;
using ::testing::HasSubstr;

// The caps this CPU can honour, the best target first.
std::vector<std::string> Caps() {
  std::vector<std::string> caps;
  for (const char* cap : {"avx512", "avx2", "sse4", "ssse3"}) {
    if (!LimitSimd(cap).ok()) continue;
    const std::string target = SimdTarget();
    if (caps.empty() || target != caps.back()) caps.push_back(target);
  }
  SLUICE_EXPECT_OK(LimitSimd("best"));
  return caps;
}

std::string CapFor(const std::string& target) {
  if (target == "AVX3" || target == "AVX3_DL") return "avx512";
  if (target == "AVX2") return "avx2";
  if (target == "SSE4") return "sse4";
  return "ssse3";
}

class SimdTest : public ::testing::Test {
 protected:
  void TearDown() override { SLUICE_EXPECT_OK(LimitSimd("best")); }
};

TEST_F(SimdTest, AnUnknownTargetIsRefusedNamingTheChoices) {
  EXPECT_THAT(LimitSimd("avx1024"), StatusIs(absl::StatusCode::kInvalidArgument,
                                             HasSubstr("SIMD target \"avx1024\" is unknown (avx512, avx2, sse4")));
}

TEST_F(SimdTest, ACapLowersTheTargetAndBestRestoresIt) {
  const std::string best = SimdTarget();
  const std::vector<std::string> caps = Caps();
  ASSERT_FALSE(caps.empty());
  EXPECT_EQ(caps.front(), best);
  SLUICE_ASSERT_OK(LimitSimd(CapFor(caps.back())));
  EXPECT_EQ(SimdTarget(), caps.back());
  if (caps.back() != "SSSE3") {  // a -march above the portable baseline
    EXPECT_THAT(LimitSimd("ssse3"),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("is below what this build was compiled for")));
    EXPECT_EQ(SimdTarget(), caps.back()) << "a refused cap keeps the one before";
  }
  SLUICE_ASSERT_OK(LimitSimd("best"));
  EXPECT_EQ(SimdTarget(), best);
}

TEST_F(SimdTest, ResamplingAndNormalizingGiveTheSameBytesOnEveryTarget) {
  const int w = 181, h = 133, c = 3, out_w = 67, out_h = 45;
  const std::vector<uint8_t> image = testing::Pattern<uint8_t>(static_cast<size_t>(w) * h * c, 17);
  const Window window{7.25, 3.5, 150.0, 120.0};
  const Normalizer normalizer(out_h, out_w, c, DType::kFloat16, /*chw=*/true, 0.5f, {0.02f, 0.03f, 0.04f},
                              {-1.f, -2.f, 0.5f});
  std::vector<std::string> runs;
  const std::vector<std::string> caps = Caps();
  ASSERT_FALSE(caps.empty());
  for (const std::string& target : caps) {
    SLUICE_ASSERT_OK(LimitSimd(CapFor(target)));
    ASSERT_EQ(SimdTarget(), target);
    std::string bytes(static_cast<size_t>(out_w) * out_h * c, '\0');
    ResampleBilinear(image.data(), w, h, c, int64_t{w} * c, window, reinterpret_cast<uint8_t*>(bytes.data()), out_w,
                     out_h);
    std::string planes(static_cast<size_t>(out_w) * out_h * c * 2, '\0');
    ResampleBilinearPlanes(
        image.data(), w, h, c, int64_t{w} * c, window, out_w, out_h, [&](int y, const int16_t* levels, int64_t stride) {
          normalizer.Planes(levels, stride, y, /*mirror=*/y % 2 == 0, reinterpret_cast<uint8_t*>(planes.data()));
        });
    std::string rows(planes.size(), '\0');
    for (int y = 0; y < out_h; ++y) {
      normalizer.Row(reinterpret_cast<const uint8_t*>(bytes.data()) + y * out_w * c, y, y % 3 == 0,
                     reinterpret_cast<uint8_t*>(rows.data()));
    }
    runs.push_back(bytes + planes + rows);
  }
  for (size_t i = 1; i < runs.size(); ++i) {
    EXPECT_TRUE(runs[i] == runs[0]) << caps[i] << " differs from " << caps[0];
  }
}

// Float weighted sums in whole vectors against a plain loop, on every
// target and for row lengths that end each way in a vector: rows that may
// write past their end, and a final row that must not (sentinels after it).
TEST_F(SimdTest, FloatRowSumsEqualAPlainLoopOnEveryTarget) {
  const int64_t rows = 9, k = 5, step = 3, slack = kRowSlackBytes / 4;
  const float w[k] = {0.1f, 0.2f, 0.4f, 0.2f, 0.1f};
  for (const int64_t n : {5, 8, 28, 77, 131}) {
    const int64_t stride = n + (k - 1) * step + slack;
    std::vector<float> src(rows * stride);
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>((i * 37) % 101) / 7.f;
    for (const std::string& target : Caps()) {
      SLUICE_ASSERT_OK(LimitSimd(CapFor(target)));
      for (const bool exact_end : {false, true}) {
        std::vector<float> dst(rows * n + slack, -1.f);
        ConvolveRows(src.data(), stride, dst.data(), n, rows, n, step, w, k, exact_end);
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t i = 0; i < n; ++i) {
            double want = 0;
            for (int64_t j = 0; j < k; ++j) want += w[j] * src[r * stride + i + j * step];
            ASSERT_NEAR(dst[r * n + i], want, 1e-5 * std::abs(want) + 1e-6)
                << target << " n " << n << " row " << r << " at " << i;
          }
        }
        if (exact_end) {
          EXPECT_TRUE(std::all_of(dst.begin() + rows * n, dst.end(), [](float v) { return v == -1.f; }))
              << target << " n " << n << ": wrote past the end";
        }
      }
    }
  }
}

// Every element size hwc_to_chw takes, channel counts with and without a
// vector path, and pixel counts that end mid-vector: each plane holds its
// channel, and nothing is written past the image.
TEST_F(SimdTest, PlanesEqualAPlainTranspositionOnEveryTarget) {
  for (const size_t elem : {1, 2, 4, 8}) {
    for (const int64_t c : {1, 2, 3, 4, 5}) {
      for (const ImageDims d : {ImageDims{1, 1, c}, ImageDims{7, 5, c}, ImageDims{32, 32, c}, ImageDims{3, 67, c}}) {
        const size_t bytes = static_cast<size_t>(d.elems()) * elem;
        std::vector<uint8_t> src(bytes);
        for (size_t i = 0; i < bytes; ++i) src[i] = static_cast<uint8_t>(i * 2654435761u >> 24);
        std::vector<uint8_t> want(bytes);
        const int64_t pixels = d.h * d.w;
        for (int64_t p = 0; p < pixels; ++p) {
          for (int64_t ch = 0; ch < c; ++ch) {
            std::copy_n(&src[(p * c + ch) * elem], elem, &want[(ch * pixels + p) * elem]);
          }
        }
        for (const std::string& target : Caps()) {
          SLUICE_ASSERT_OK(LimitSimd(CapFor(target)));
          std::vector<uint8_t> dst(bytes + 64, 0xee);
          HwcToChw(d, elem, src.data(), dst.data());
          ASSERT_TRUE(std::equal(want.begin(), want.end(), dst.begin()))
              << target << " elem " << elem << " " << d.h << "x" << d.w << "x" << c;
          EXPECT_TRUE(std::all_of(dst.begin() + bytes, dst.end(), [](uint8_t v) { return v == 0xee; }))
              << target << ": wrote past the image";
        }
      }
    }
  }
}

// The vertical pass: one row of rows * n values with step n, over rows held
// with their borders, exactly up to the image's end.
TEST_F(SimdTest, AFlatVerticalSumIsEachColumnsWeightedSum) {
  const int64_t rows = 7, n = 13, k = 3, slack = kRowSlackBytes / 4;
  const float w[k] = {0.25f, 0.5f, 0.25f};
  std::vector<float> src((rows + k - 1) * n + slack);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>((i * 53) % 97);
  for (const std::string& target : Caps()) {
    SLUICE_ASSERT_OK(LimitSimd(CapFor(target)));
    std::vector<float> dst(rows * n + slack, -1.f);
    ConvolveRows(src.data(), 0, dst.data(), 0, 1, rows * n, n, w, k, /*exact_end=*/true);
    for (int64_t y = 0; y < rows; ++y) {
      for (int64_t x = 0; x < n; ++x) {
        const float want = 0.25f * src[y * n + x] + 0.5f * src[(y + 1) * n + x] + 0.25f * src[(y + 2) * n + x];
        ASSERT_FLOAT_EQ(dst[y * n + x], want) << target << " at " << y << "," << x;
      }
    }
    EXPECT_TRUE(std::all_of(dst.begin() + rows * n, dst.end(), [](float v) { return v == -1.f; })) << target;
  }
}

// Float rows with their borders: by lane permutations where the borders
// come from a row's first and last vector, by copies where they do not
// (rows narrower than a vector, borders wider than one).
TEST_F(SimdTest, PaddedFloatRowsHoldTheValuesTheirBordersName) {
  const int64_t rows = 3;
  struct Case {
    int64_t n;
    std::vector<int32_t> left, right;
  };
  const std::vector<Case> cases = {
      {28, {5, 4, 3, 2, 1}, {26, 25, 24, 23, 22}},  // W1's reflect-101, 11 taps
      {5, {2, 1}, {3, 2}},                          // narrower than a vector
      {40, std::vector<int32_t>(20, 19), {39, 0, 38}},
  };
  for (const Case& c : cases) {
    const int64_t left_count = static_cast<int64_t>(c.left.size()), right_count = static_cast<int64_t>(c.right.size());
    const int64_t stride = left_count + c.n + right_count + kRowSlackBytes / 4;
    std::vector<float> src(rows * c.n);
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i) + 0.5f;
    for (const std::string& target : Caps()) {
      SLUICE_ASSERT_OK(LimitSimd(CapFor(target)));
      std::vector<float> dst(rows * stride, -1.f);
      PadRows(src.data(), rows, c.n, c.left.data(), left_count, c.right.data(), right_count, dst.data(), stride);
      for (int64_t r = 0; r < rows; ++r) {
        const float* in = src.data() + r * c.n;
        std::vector<float> want;
        for (int32_t i : c.left) want.push_back(in[i]);
        want.insert(want.end(), in, in + c.n);
        for (int32_t i : c.right) want.push_back(in[i]);
        const std::vector<float> got(dst.begin() + r * stride, dst.begin() + r * stride + want.size());
        EXPECT_EQ(got, want) << target << " n " << c.n << " row " << r;
      }
    }
  }
}

// uint8 images blur in integers: the same bits on every target.
TEST_F(SimdTest, FixedPointBlurIsTheSameOnEveryTarget) {
  const int64_t rows = 9, n = 77, k = 5, slack = kRowSlackBytes / 2;
  const int64_t stride = n + (k - 1) * 3 + slack;
  std::vector<int16_t> data(static_cast<size_t>(rows + k) * stride);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<int16_t>(((i * 37) % 256) << kFixedValueShift);
  std::vector<const int16_t*> src(rows + k);
  for (int64_t r = 0; r < rows + k; ++r) src[r] = data.data() + r * stride;
  const int16_t w[k] = {1000, 7000, 16768, 7000, 1000};
  const std::vector<std::string> caps = Caps();
  std::vector<std::vector<uint8_t>> outs;
  for (const std::string& target : caps) {
    SLUICE_ASSERT_OK(LimitSimd(CapFor(target)));
    std::vector<int16_t> mid(static_cast<size_t>(rows + k) * (n + slack));
    std::vector<int16_t*> mids(rows + k);
    for (int64_t r = 0; r < rows + k; ++r) mids[r] = mid.data() + r * (n + slack);
    ConvolveRows(src.data(), mids.data(), rows + k - 1, n, 3, w, k);
    std::vector<uint8_t> out(static_cast<size_t>(rows) * n);
    std::vector<uint8_t*> dst(rows);
    for (int64_t r = 0; r < rows; ++r) dst[r] = out.data() + r * n;
    WeightedSumRows(mids.data(), dst.data(), rows, n, w, k);
    outs.push_back(out);
  }
  for (size_t t = 1; t < outs.size(); ++t) EXPECT_EQ(outs[t], outs[0]) << caps[t] << " differs from " << caps[0];
}

// A uint8 row's borders by byte shuffles: each index names a byte of the
// row's first or last 16, the top bit a 0; the row itself between them.
TEST_F(SimdTest, PaddedRowsHoldTheBordersTheirShufflesName) {
  const int64_t rows = 3, n = 20, stride = 64;
  std::vector<uint8_t> src(rows * n);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i + 1);
  BorderShuffle borders{};
  const uint8_t left[] = {5, 4, 3, 0x80, 15}, right[] = {15, 14, 0, 0x80};
  std::copy(std::begin(left), std::end(left), borders.left);
  std::copy(std::begin(right), std::end(right), borders.right);
  borders.left_count = 5, borders.right_count = 4;
  for (const std::string& target : Caps()) {
    SLUICE_ASSERT_OK(LimitSimd(CapFor(target)));
    std::vector<uint8_t> dst(rows * stride, 0xEE);
    PadRows(src.data(), rows, n, borders, dst.data(), stride);
    for (int64_t r = 0; r < rows; ++r) {
      const uint8_t* in = src.data() + r * n;
      const std::vector<uint8_t> expected = {in[5],  in[4],  in[3], 0, in[15],  // left, then right
                                             in[19], in[18], in[4], 0};
      std::vector<uint8_t> got(9);
      std::copy_n(dst.begin() + r * stride, 5, got.begin());
      std::copy_n(dst.begin() + r * stride + 5 + n, 4, got.begin() + 5);
      EXPECT_EQ(got, expected) << target << " row " << r;
      EXPECT_TRUE(std::equal(in, in + n, dst.begin() + r * stride + 5)) << target << " row " << r;
    }
  }
}

}  // namespace
}  // namespace sluice::ops
