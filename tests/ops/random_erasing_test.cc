// random_erasing: each image keeps its values except in at most one box,
// the same in every channel, set to the value (or to normal noise), with
// the box's share of the area and its aspect ratio in their ranges.
#include <cmath>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "op_harness.h"
#include "status_matchers.h"

namespace sluice::ops {
namespace {

using ::sluice::testing::StatusIs;
using ::testing::HasSubstr;
using testing::Infer;
using testing::RunOp;

constexpr int64_t kC = 3, kH = 20, kW = 30, kRows = 500;

struct Found {
  int64_t area = 0, h = 0, w = 0;
};

// The box where `out` differs from `in` (an image, CHW or HWC), checking
// that it is one box, the same in every channel, and that `erased(ch, v)`.
template <typename T, typename Erased>
Found FindBox(const T* in, const T* out, bool chw, Erased erased) {
  int64_t y1 = kH, x1 = kW, y2 = -1, x2 = -1, pixels = 0;
  for (int64_t y = 0; y < kH; ++y) {
    for (int64_t x = 0; x < kW; ++x) {
      int changed = 0;
      for (int64_t ch = 0; ch < kC; ++ch) {
        const int64_t i = chw ? (ch * kH + y) * kW + x : (y * kW + x) * kC + ch;
        if (out[i] == in[i]) continue;
        ++changed;
        EXPECT_TRUE(erased(ch, out[i])) << "element " << i;
      }
      EXPECT_TRUE(changed == 0 || changed == kC) << "pixel " << y << "," << x;
      if (changed == 0) continue;
      ++pixels;
      y1 = std::min(y1, y), x1 = std::min(x1, x), y2 = std::max(y2, y), x2 = std::max(x2, x);
    }
  }
  if (pixels == 0) return {};
  EXPECT_EQ(pixels, (y2 - y1 + 1) * (x2 - x1 + 1)) << "not one box";
  return {pixels, y2 - y1 + 1, x2 - x1 + 1};
}

TEST(RandomErasing, ErasesOneBoxOfTheDrawnShareAndRatio) {
  const ColumnSpec spec{"image", DType::kFloat32, Shape{kC, kH, kW}};
  std::vector<float> in(kRows * kC * kH * kW);
  for (size_t i = 0; i < in.size(); ++i) in[i] = 1000.f + static_cast<float>(i % 100000);
  const std::vector<float> out = RunOp<float>("random_erasing", R"({"p": 1, "value": [-1, -2, -3]})", spec, in, kRows);
  const int64_t n = kC * kH * kW;
  int boxes = 0;
  double share = 0;
  for (int64_t r = 0; r < kRows; ++r) {
    const Found b = FindBox(in.data() + r * n, out.data() + r * n, true,
                            [](int64_t ch, float v) { return v == -1.f - static_cast<float>(ch); });
    if (b.area == 0) continue;
    ++boxes;
    share += static_cast<double>(b.area) / (kH * kW);
    // The rounded sides of an area share in [0.02, 0.33] and a ratio in [0.3, 3.3].
    EXPECT_LE(b.area, (std::sqrt(0.33 * 3.3 * kH * kW) + 0.5) * (std::sqrt(0.33 / 0.3 * kH * kW) + 0.5));
    EXPECT_LE(static_cast<double>(b.h) / b.w,
              (std::sqrt(0.33 * 3.3 * kH * kW) + 0.5) / (std::sqrt(0.02 / 3.3 * kH * kW) - 0.5));
  }
  // torchvision's get_params on a 20x30 image, 4,000 draws: every draw fits
  // a box within its ten tries, of mean share 0.170 (the rounded sides
  // shave the uniform [0.02, 0.33]'s 0.175); 5 standard errors either side.
  EXPECT_GT(boxes, kRows * 98 / 100);
  EXPECT_NEAR(share / boxes, 0.170, 0.02);
}

// RandomErasing rounds the box's sides with Python's round: a share of
// 0.25 of 5x5 at ratio 1 is a side of 2.5, so 2 (3 by llround).
TEST(RandomErasing, RoundsHalfSidesToEvenAsTorchvisionDoes) {
  constexpr int64_t kSide = 5, kImages = 20;
  const ColumnSpec spec{"image", DType::kFloat32, Shape{1, kSide, kSide}};
  const std::vector<float> in(kImages * kSide * kSide, 1.f);
  const std::vector<float> out = RunOp<float>(
      "random_erasing", R"({"p": 1, "scale": [0.25, 0.25], "ratio": [1, 1], "value": [0]})", spec, in, kImages);
  for (int64_t r = 0; r < kImages; ++r) {
    int64_t erased = 0;
    for (int64_t i = 0; i < kSide * kSide; ++i) erased += out[r * kSide * kSide + i] == 0.f;
    EXPECT_EQ(erased, 4) << "image " << r;
  }
}

TEST(RandomErasing, PIsTheShareOfImagesErasedInAnyLayout) {
  const ColumnSpec spec{"image", DType::kUInt8, Shape{kH, kW, kC}};
  std::vector<uint8_t> in(2000 * kC * kH * kW, 7);
  const std::vector<uint8_t> out =
      RunOp<uint8_t>("random_erasing", R"({"p": 0.3, "value": 255, "layout": "HWC"})", spec, in, 2000);
  const int64_t n = kC * kH * kW;
  int erased = 0;
  for (int64_t r = 0; r < 2000; ++r) {
    erased +=
        FindBox(in.data() + r * n, out.data() + r * n, false, [](int64_t, uint8_t v) { return v == 255; }).area > 0;
  }
  EXPECT_NEAR(erased, 600, 5 * 20.5);  // p of 2,000; 5 binomial deviations
}

TEST(RandomErasing, RandomValueIsStandardNormalNoise) {
  const ColumnSpec spec{"image", DType::kFloat32, Shape{kC, kH, kW}};
  std::vector<float> in(kRows * kC * kH * kW, 100.f);
  const std::vector<float> out = RunOp<float>("random_erasing", R"({"p": 1, "random_value": true})", spec, in, kRows);
  double sum = 0, sq = 0;
  int64_t count = 0;
  for (float v : out) {
    if (v == 100.f) continue;
    sum += v, sq += static_cast<double>(v) * v, ++count;
  }
  ASSERT_GT(count, 10000);
  EXPECT_NEAR(sum / count, 0, 5 / std::sqrt(static_cast<double>(count)));
  EXPECT_NEAR(sq / count - (sum / count) * (sum / count), 1, 5 * std::sqrt(2.0 / count));
}

TEST(RandomErasing, BadAttrsNameWhatIsWrong) {
  const ColumnSpec u8{"image", DType::kUInt8, Shape{kC, kH, kW}};
  EXPECT_THAT(Infer("random_erasing", R"({"random_value": true})", u8).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, AllOf(HasSubstr("random_value"), HasSubstr("float32"))));
  EXPECT_THAT(Infer("random_erasing", R"({"value": [1, 2]})", u8).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("one per channel (3)")));
  EXPECT_THAT(Infer("random_erasing", R"({"scale": [0.5, 0.1]})", u8).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'scale'")));
  EXPECT_THAT(Infer("random_erasing", "{}", ColumnSpec{"image", DType::kUInt8, Shape{10}}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("[C,H,W]")));
}

}  // namespace
}  // namespace sluice::ops
