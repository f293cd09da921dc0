#include <cstring>
#include <limits>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "op_harness.h"
#include "sluice/kernels/value_loops.h"
#include "status_matchers.h"

namespace sluice::ops {
namespace {

using kernels::ScaleOffset;
using kernels::ScaleOffsetPattern;

using ::sluice::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::RunOp;

TEST(Cast, FloatToUint8TruncatesAndSaturates) {
  const std::vector<float> in = {-3.f, 0.f, 1.9f, 254.5f, 300.f, std::numeric_limits<float>::quiet_NaN()};
  EXPECT_THAT((RunOp<uint8_t, float>("cast", R"({"field": "x", "dtype": "uint8"})",
                                     ColumnSpec{"x", DType::kFloat32, Shape{6}}, in, 1)),
              ElementsAre(0, 0, 1, 254, 255, 0));
}

TEST(Cast, Int64ToInt32Saturates) {
  const std::vector<int64_t> in = {int64_t{1} << 40, -5, -(int64_t{1} << 40)};
  EXPECT_THAT((RunOp<int32_t, int64_t>("cast", R"({"field": "x", "dtype": "int32"})",
                                       ColumnSpec{"x", DType::kInt64, Shape{3}}, in, 1)),
              ElementsAre(std::numeric_limits<int32_t>::max(), -5, std::numeric_limits<int32_t>::min()));
}

TEST(ToDtype, ScalesBetweenUint8AndFloat32AsTorchvisionV2) {
  // uint8 to float32: v * float(1/255), what v2's to_dtype computes
  // (image.to(float32).mul_(1 / 255)); every level.
  std::vector<uint8_t> levels(256);
  for (int v = 0; v < 256; ++v) levels[v] = static_cast<uint8_t>(v);
  const ColumnSpec u8{"image", DType::kUInt8, Shape{256}};
  const std::vector<float> up = RunOp<float>("to_dtype", R"({"dtype": "float32", "scale": true})", u8, levels, 1);
  for (int v = 0; v < 256; ++v) EXPECT_EQ(up[v], static_cast<float>(v) * static_cast<float>(1.0 / 255)) << v;
  // float32 to uint8: x * 255.999 truncated, saturated; back from the levels gives them again.
  const std::vector<uint8_t> back = RunOp<uint8_t>("to_dtype", R"({"dtype": "uint8", "scale": true})",
                                                   ColumnSpec{"image", DType::kFloat32, Shape{256}}, up, 1);
  for (int v = 0; v < 256; ++v) EXPECT_EQ(back[v], v);
  const std::vector<float> edges = {-0.2f, 0.f, 0.5f, 0.99999f, 1.f, 1.7f};
  EXPECT_THAT(RunOp<uint8_t>("to_dtype", R"({"dtype": "uint8", "scale": true})",
                             ColumnSpec{"image", DType::kFloat32, Shape{6}}, edges, 1),
              ElementsAre(0, 0, 127, 255, 255, 255));
  // Without scale: cast.
  EXPECT_THAT(
      RunOp<uint8_t>("to_dtype", R"({"dtype": "uint8"})", ColumnSpec{"image", DType::kFloat32, Shape{6}}, edges, 1),
      ElementsAre(0, 0, 0, 0, 1, 1));
  EXPECT_THAT(testing::Infer("to_dtype", R"({"dtype": "int32", "scale": true})", u8).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, AllOf(HasSubstr("'scale'"), HasSubstr("uint8 to int32"))));
}

TEST(Normalize, MatchesTheFormulaPerChannel) {
  // Two HWC samples of 2x2x3 uint8: (x / 255 - mean[c]) / std[c].
  std::vector<uint8_t> in(24);
  for (int i = 0; i < 24; ++i) in[i] = static_cast<uint8_t>(i * 10);
  const std::vector<float> out = RunOp<float, uint8_t>(
      "normalize", R"({"mean": [0.1, 0.2, 0.3], "std": [0.5, 0.25, 2], "scale": 0.00392156862745098})",
      ColumnSpec{"image", DType::kUInt8, Shape{2, 2, 3}}, in, 2);
  const float mean[] = {0.1f, 0.2f, 0.3f}, sd[] = {0.5f, 0.25f, 2.f};
  for (int i = 0; i < 24; ++i) {
    EXPECT_NEAR(out[i], (in[i] / 255.f - mean[i % 3]) / sd[i % 3], 1e-6) << i;
  }
}

TEST(Normalize, ChannelsFirst) {
  std::vector<float> in = {1, 2, 3, 4, 5, 6, 7, 8};  // 2 x 2 x 2, CHW
  const std::vector<float> out = RunOp<float, float>("normalize", R"({"mean": [1, 5], "std": [1, 2], "layout": "CHW"})",
                                                     ColumnSpec{"image", DType::kFloat32, Shape{2, 2, 2}}, in, 1);
  EXPECT_THAT(out, ElementsAre(0, 1, 2, 3, 0, 0.5, 1, 1.5));
}

TEST(Normalize, WrongChannelCountNamesTheAttr) {
  EXPECT_THAT(testing::Infer("normalize", R"({"mean": [0.1, 0.2], "std": [1, 1]})",
                             ColumnSpec{"image", DType::kUInt8, Shape{4, 4, 3}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("op 'normalize': attr 'mean' has 2 values; column 'image' [4,4,3] has 3 channels")));
  // Its width is no count of channels.
  EXPECT_THAT(testing::Infer("normalize", R"({"mean": [0.1, 0.2, 0.3], "std": [1, 1, 1]})",
                             ColumnSpec{"image", DType::kUInt8, Shape{8, 10}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("has 3 values; column 'image' [8,10] is one channel (an [H,W] image")));
}

TEST(Rescale, ScalesToFloat) {
  const std::vector<uint8_t> in = {0, 51, 255};
  EXPECT_THAT((RunOp<float, uint8_t>("rescale", R"({"field": "x", "scale": 0.00392156862745098, "offset": -1})",
                                     ColumnSpec{"x", DType::kUInt8, Shape{3}}, in, 1)),
              ElementsAre(-1.f, ::testing::FloatNear(-0.8f, 1e-6), ::testing::FloatNear(0.f, 1e-6)));
}

// Stored past the caches, the loops write exactly what they write through
// them: at every length around the vector and block sizes, from every
// misalignment of the output, and at every phase of a channel pattern.
TEST(ValueLoops, BypassingTheCacheWritesTheSameValues) {
  std::mt19937 rng(5);
  std::vector<uint8_t> bytes(3 * 2048 + 100);
  std::vector<float> floats(bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) {
    bytes[i] = static_cast<uint8_t>(rng());
    floats[i] = static_cast<float>(rng() % 1000) / 7.f;
  }
  const std::vector<float> a = {0.5f, 1.5f, -2.f, 0.25f, 3.f, 1.f}, b = {1.f, -1.f, 0.5f, 2.f, 0.f, -3.f};
  std::vector<float> cached(bytes.size() + 16), streamed(bytes.size() + 16);
  for (int64_t n : {0, 1, 15, 16, 17, 2047, 2048, 2049, 3 * 2048 + 99}) {
    for (int misalign : {0, 1, 5}) {
      SCOPED_TRACE(::testing::Message() << n << " values, output misaligned by " << misalign << " floats");
      auto same = [&] {
        return std::memcmp(cached.data() + misalign, streamed.data() + misalign, n * sizeof(float)) == 0;
      };
      ScaleOffset(bytes.data(), n, 1 / 255.f, -0.5f, cached.data() + misalign);
      ScaleOffset(bytes.data(), n, 1 / 255.f, -0.5f, streamed.data() + misalign, true);
      EXPECT_TRUE(same());
      ScaleOffset(floats.data(), n, 0.3f, 2.f, cached.data() + misalign);
      ScaleOffset(floats.data(), n, 0.3f, 2.f, streamed.data() + misalign, true);
      EXPECT_TRUE(same());
      ScaleOffsetPattern(bytes.data(), n, a.data(), b.data(), 6, cached.data() + misalign);
      ScaleOffsetPattern(bytes.data(), n, a.data(), b.data(), 6, streamed.data() + misalign, true);
      EXPECT_TRUE(same());
      ScaleOffsetPattern(floats.data(), n, a.data(), b.data(), 6, cached.data() + misalign);
      ScaleOffsetPattern(floats.data(), n, a.data(), b.data(), 6, streamed.data() + misalign, true);
      EXPECT_TRUE(same());
    }
  }
}

}  // namespace
}  // namespace sluice::ops
