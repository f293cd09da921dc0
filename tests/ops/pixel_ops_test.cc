// The level ops (invert, posterize, solarize, autocontrast, equalize,
// grayscale) and the color adjustments (color_jitter, adjust_sharpness) against torchvision's functional ops on uint8
// tensors, through tests/ops/torchvision_reference.py under Debian's /usr/bin/python3: equal bytes, as both do the same
// integer and float32 steps.
#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "op_harness.h"
#include "status_matchers.h"

namespace sluice::ops {
namespace {

using ::sluice::testing::StatusIs;
using ::testing::HasSubstr;
using testing::RunOp;
using testing::TorchvisionReference;

constexpr int64_t kH = 40, kW = 40;  // 1,600 pixels: equalize's step is 6, not 0

// Six RGB images that reach the ops' special cases: full-range noise, a
// low-contrast one, one with a flat channel, one with two levels, a
// gradient and a black one.
std::vector<uint8_t> Images() {
  std::mt19937 gen(11);
  std::vector<uint8_t> v;
  for (int image = 0; image < 6; ++image) {
    for (int64_t i = 0; i < kH * kW; ++i) {
      for (int c = 0; c < 3; ++c) {
        uint8_t x = 0;
        switch (image) {
          case 0:
            x = gen() % 256;
            break;
          case 1:
            x = 100 + gen() % 40;
            break;
          case 2:
            x = c == 1 ? 77 : gen() % 256;
            break;
          case 3:
            x = (gen() % 2) ? 30 : 200;
            break;
          case 4:
            x = static_cast<uint8_t>(i * 2 + c);
            break;
          default:
            x = 0;
        }
        v.push_back(x);
      }
    }
  }
  return v;
}

const ColumnSpec kRgb{"image", DType::kUInt8, Shape{kH, kW, 3}};

class PixelOpsTest : public ::testing::Test {
 protected:
  std::string Reference(const std::vector<uint8_t>& images, nlohmann::json spec) {
    return TorchvisionReference(dir_.path(), std::string(images.begin(), images.end()), {6, kH, kW, 3}, "uint8",
                                std::move(spec));
  }
  sluice::testing::TempDir dir_;
};

TEST_F(PixelOpsTest, LevelOpsEqualTorchvision) {
  const std::vector<uint8_t> images = Images();
  struct Case {
    std::string op, attrs;
    nlohmann::json spec;
  };
  const std::vector<Case> cases = {
      {"invert", "{}", {{"op", "invert"}}},
      {"posterize", R"({"bits": 3})", {{"op", "posterize"}, {"bits", 3}}},
      {"posterize", R"({"bits": 8})", {{"op", "posterize"}, {"bits", 8}}},
      {"solarize", R"({"threshold": 128})", {{"op", "solarize"}, {"threshold", 128}}},
      {"solarize", R"({"threshold": 99.5})", {{"op", "solarize"}, {"threshold", 99.5}}},
      {"autocontrast", "{}", {{"op", "autocontrast"}}},
      {"equalize", "{}", {{"op", "equalize"}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op + " " + c.attrs);
    const std::vector<uint8_t> got = RunOp<uint8_t>(c.op, c.attrs, kRgb, images, 6);
    const std::string want = Reference(images, c.spec);
    ASSERT_EQ(got.size(), want.size());
    int differ = 0;
    for (size_t i = 0; i < got.size(); ++i) differ += got[i] != static_cast<uint8_t>(want[i]);
    EXPECT_EQ(differ, 0);
  }
}

TEST_F(PixelOpsTest, GrayscaleEqualsTorchvisionWithOneOrThreeChannels) {
  const std::vector<uint8_t> images = Images();
  for (int channels : {1, 3}) {
    const std::vector<uint8_t> got =
        RunOp<uint8_t>("grayscale", absl::StrCat(R"({"num_output_channels": )", channels, "}"), kRgb, images, 6);
    const std::string want = Reference(images, {{"op", "grayscale"}, {"num_output_channels", channels}});
    ASSERT_EQ(got.size(), want.size());
    EXPECT_TRUE(std::string(got.begin(), got.end()) == want) << channels << " channels";
  }
}

TEST_F(PixelOpsTest, ColorAdjustmentsEqualTorchvision) {
  // color_jitter with one factor's range a single value: torchvision's
  // adjust_* with that factor; adjust_sharpness.
  const std::vector<uint8_t> images = Images();
  struct Case {
    std::string op, attrs, fn;
    double factor;
  };
  const std::vector<Case> cases = {
      {"color_jitter", R"({"brightness": [1.7, 1.7]})", "brightness", 1.7},
      {"color_jitter", R"({"brightness": [0.35, 0.35]})", "brightness", 0.35},
      {"color_jitter", R"({"contrast": [0.6, 0.6]})", "contrast", 0.6},
      {"color_jitter", R"({"contrast": [1.9, 1.9]})", "contrast", 1.9},
      {"color_jitter", R"({"saturation": [0.2, 0.2]})", "saturation", 0.2},
      {"color_jitter", R"({"saturation": [2.5, 2.5]})", "saturation", 2.5},
      {"color_jitter", R"({"hue": [0.13, 0.13]})", "hue", 0.13},
      {"color_jitter", R"({"hue": [-0.4, -0.4]})", "hue", -0.4},
      {"adjust_sharpness", R"({"sharpness_factor": 2.0})", "sharpness", 2.0},
      {"adjust_sharpness", R"({"sharpness_factor": 0.3})", "sharpness", 0.3},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op + " " + c.attrs);
    const std::vector<uint8_t> got = RunOp<uint8_t>(c.op, c.attrs, kRgb, images, 6);
    const std::string want = Reference(images, {{"op", c.fn}, {"factor", c.factor}});
    ASSERT_EQ(got.size(), want.size());
    int differ = 0;
    for (size_t i = 0; i < got.size(); ++i) differ += got[i] != static_cast<uint8_t>(want[i]);
    EXPECT_EQ(differ, 0) << "levels differ";
  }
}

TEST(PixelOps, ColorJitterDrawsItsFactorsAndOrderPerSample) {
  // Brightness alone in [0.5, 1.5] on a flat 100 image: each output level is
  // 100 f truncated, so f's spread shows; the same sample, the same draw.
  const int64_t kRows = 1000;
  const ColumnSpec spec{"image", DType::kUInt8, Shape{2, 2, 3}};
  const std::vector<uint8_t> in(kRows * 12, 100);
  const std::vector<uint8_t> out = RunOp<uint8_t>("color_jitter", R"({"brightness": 0.5})", spec, in, kRows);
  double sum = 0;
  int lo = 255, hi = 0;
  for (int64_t r = 0; r < kRows; ++r) {
    sum += out[r * 12];
    lo = std::min<int>(lo, out[r * 12]), hi = std::max<int>(hi, out[r * 12]);
  }
  EXPECT_GE(lo, 50);
  EXPECT_LE(hi, 150);
  EXPECT_NEAR(sum / kRows, 99.5, 5 * 28.9 / std::sqrt(1000.0));  // uniform 50..150 truncated
  const std::vector<uint8_t> again = RunOp<uint8_t>("color_jitter", R"({"brightness": 0.5})", spec, in, kRows);
  EXPECT_EQ(out, again);
  // All four at once, in an order drawn per sample: the order matters (a
  // brightness before or after a contrast gives other levels), so samples
  // of one image and one set of factors come out in more than one way.
  const std::vector<uint8_t> noise = [] {
    std::vector<uint8_t> v(12);
    for (int i = 0; i < 12; ++i) v[i] = static_cast<uint8_t>(20 * i + 7);
    return v;
  }();
  std::vector<uint8_t> same(kRows * 12);
  for (int64_t r = 0; r < kRows; ++r) std::copy(noise.begin(), noise.end(), same.begin() + r * 12);
  const std::vector<uint8_t> mixed = RunOp<uint8_t>(
      "color_jitter",
      R"({"brightness": [1.4, 1.4], "contrast": [0.5, 0.5], "saturation": [1.5, 1.5], "hue": [0.1, 0.1]})", spec, same,
      kRows);
  std::set<std::vector<uint8_t>> outcomes;
  for (int64_t r = 0; r < kRows; ++r)
    outcomes.insert(std::vector<uint8_t>(mixed.begin() + r * 12, mixed.begin() + r * 12 + 12));
  EXPECT_GT(outcomes.size(), 6u);
  EXPECT_LE(outcomes.size(), 24u);  // at most the 4! orders
}

TEST(PixelOps, ProbabilityPAppliesToThatShareOfImagesTheSameWhateverTheOrder) {
  // 2,000 images, p = 0.3: applied to 600 +- 5 binomial deviations (20.5).
  const int64_t kRows = 2000;
  const ColumnSpec spec{"image", DType::kUInt8, Shape{2, 2, 3}};
  std::vector<uint8_t> in(kRows * 12);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i % 200);
  for (const char* op : {"invert", "random_grayscale"}) {
    SCOPED_TRACE(op);
    const std::vector<uint8_t> out = RunOp<uint8_t>(op, R"({"p": 0.3})", spec, in, kRows);
    int changed = 0;
    for (int64_t r = 0; r < kRows; ++r)
      changed += !std::equal(in.begin() + r * 12, in.begin() + r * 12 + 12, out.begin() + r * 12);
    EXPECT_NEAR(changed, 600, 103);
    // Rows 1000.. run on their own (another tile) draw as they did in the whole run.
    const std::vector<uint8_t> tail(in.begin() + 1000 * 12, in.end());
    const std::vector<uint8_t> tail_out = RunOp<uint8_t>(op, R"({"p": 0.3})", spec, tail, kRows - 1000, 1, 1000);
    EXPECT_TRUE(std::equal(tail_out.begin(), tail_out.end(), out.begin() + 1000 * 12));
  }
}

TEST(PixelOps, BadInputsNameWhatIsWrong) {
  const ColumnSpec floats{"image", DType::kFloat32, Shape{4, 4, 3}};
  EXPECT_THAT(testing::Infer("equalize", "{}", floats).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("uint8")));
  EXPECT_THAT(testing::Infer("grayscale", R"({"num_output_channels": 2})", kRgb).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("num_output_channels")));
  EXPECT_THAT(testing::Infer("grayscale", "{}", ColumnSpec{"image", DType::kUInt8, Shape{4, 4, 4}}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("[H,W,3]")));
  EXPECT_THAT(testing::Infer("posterize", R"({"bits": 9})", kRgb).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("bits")));
  EXPECT_THAT(testing::Infer("invert", R"({"p": 1.5})", kRgb).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'p'")));
  EXPECT_THAT(testing::Infer("color_jitter", R"({"hue": 0.7})", kRgb).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, AllOf(HasSubstr("'hue'"), HasSubstr("[-0.5, 0.5]"))));
  EXPECT_THAT(testing::Infer("color_jitter", R"({"contrast": [1.5, 0.5]})", kRgb).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'contrast'")));
}

}  // namespace
}  // namespace sluice::ops
