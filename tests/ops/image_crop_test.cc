#include <cmath>
#include <cstring>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "op_harness.h"
#include "sluice/core/status_macros.h"
#include "sluice/ops/crop_window.h"
#include "sluice/pipeline_builder.h"
#include "status_matchers.h"

namespace sluice::ops {
namespace {

using ::sluice::testing::StatusIs;
using ::testing::HasSubstr;

// One 4x6 RGB image whose pixel (y, x, c) is 10 * y + x + 100 * c.
std::vector<uint8_t> Pixels() {
  std::vector<uint8_t> p(4 * 6 * 3);
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 6; ++x)
      for (int c = 0; c < 3; ++c) p[(y * 6 + x) * 3 + c] = static_cast<uint8_t>(10 * y + x + 100 * c);
  return p;
}

// `op` on the image, through the kernel-level harness.
absl::StatusOr<Tensor> RunOne(const OpSpec& op) {
  std::vector<uint8_t> pixels = Pixels();
  Tensor in = Tensor::Allocate(DType::kUInt8, Shape{1, 4, 6, 3});
  std::memcpy(in.raw_data(), pixels.data(), pixels.size());
  return testing::RunKernel(op, ColumnSpec{"image", DType::kUInt8, Shape{4, 6, 3}}, in);
}

TEST(CropMirrorNormalize, MirrorsCropsNormalizesAndGoesChw) {
  ASSERT_OK_AND_ASSIGN(
      Tensor b,
      RunOne(Op(
          "crop_mirror_normalize",
          {{"crop", {2, 4}}, {"mirror", 1.0}, {"mean", {1.0, 2.0, 3.0}}, {"std", {2.0, 4.0, 8.0}}, {"scale", 1.0}})));
  const Tensor& t = b;
  EXPECT_EQ(t.shape(), (Shape{1, 3, 2, 4}));
  EXPECT_EQ(t.dtype(), DType::kFloat32);
  const float* v = t.data<float>();
  // Centre crop of 4x6 to 2x4: rows 1..2, columns 1..4; mirrored: column 4 first.
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 2; ++y)
      for (int x = 0; x < 4; ++x) {
        const double pixel = 10 * (y + 1) + (4 - x) + 100 * c;
        const double mean[] = {1, 2, 3}, std_dev[] = {2, 4, 8};
        EXPECT_FLOAT_EQ(v[(c * 2 + y) * 4 + x], static_cast<float>((pixel - mean[c]) / std_dev[c]));
      }
}

TEST(CropMirrorNormalize, Float16AndUint8Outputs) {
  ASSERT_OK_AND_ASSIGN(
      Tensor half,
      RunOne(Op("crop_mirror_normalize",
                {{"mirror", 0.0}, {"mean", {0.0}}, {"std", {1.0}}, {"scale", 1 / 256.0}, {"dtype", "float16"}})));
  EXPECT_EQ(half.dtype(), DType::kFloat16);
  uint16_t bits[3];
  std::memcpy(&bits[0], half.raw_data(), 2);           // 0 / 256
  std::memcpy(&bits[1], half.raw_data() + 2 * 1, 2);   // pixel (0, 1): 1 / 256
  std::memcpy(&bits[2], half.raw_data() + 2 * 24, 2);  // channel 1: 100 / 256
  EXPECT_EQ(bits[0], 0x0000);
  EXPECT_EQ(bits[1], 0x1c00);  // 2^-8
  EXPECT_EQ(bits[2], 0x3640);  // 0.390625
  ASSERT_OK_AND_ASSIGN(Tensor u8, RunOne(Op("crop_mirror_normalize", {{"mirror", 0.0}, {"dtype", "uint8"}})));
  const uint8_t* p = u8.data<uint8_t>();
  EXPECT_EQ(u8.shape(), (Shape{1, 3, 4, 6}));
  EXPECT_EQ(p[1 * 24 + 2 * 6 + 5], 125);  // channel 1, row 2, column 5: 20 + 5 + 100
}

TEST(CenterCrop, TakesTheMiddleAndRefusesToGrow) {
  ASSERT_OK_AND_ASSIGN(Tensor b, RunOne(Op("center_crop", {{"size", {2, 2}}})));
  const uint8_t* p = b.data<uint8_t>();
  EXPECT_EQ(b.shape(), (Shape{1, 2, 2, 3}));
  EXPECT_EQ(p[0], 12);      // (1, 2)
  EXPECT_EQ(p[3 * 3], 23);  // (2, 3)
  EXPECT_THAT(RunOne(Op("center_crop", {{"size", {5, 2}}})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("larger than the image")));
}

// torchvision's int(round(margin / 2)): Python rounds a half to the even
// neighbour. Margins of 1 and 5 over 4x6 give a 3x1 crop at top round(0.5)
// = 0 and left round(2.5) = 2 (rounding halves up gave 1 and 3); margins of
// 3 and 3 a 1x3 crop at round(1.5) = 2 and 2.
TEST(CenterCrop, HalfPixelMarginsRoundToEvenAsTorchvisionDoes) {
  ASSERT_OK_AND_ASSIGN(Tensor tall, RunOne(Op("center_crop", {{"size", {3, 1}}})));
  EXPECT_EQ(tall.data<uint8_t>()[0], 2);  // (0, 2)
  ASSERT_OK_AND_ASSIGN(Tensor wide, RunOne(Op("center_crop", {{"size", {1, 3}}})));
  EXPECT_EQ(wide.data<uint8_t>()[0], 22);  // (2, 2)
}

// torchvision rounds the window's sides with Python's round, a half to the
// even neighbour. A share of 0.25 of 45x45 at ratio 1 is a side of 22.5:
// 22 there (23 by lround). 30x3 at ratio 1.5 fits no drawn window and falls
// back to the centre: round(3 * 1.5) = 4 wide at (30 - 4) // 2 = 13.
TEST(RandomResizedCrop, RoundsHalfSidesToEvenAsTorchvisionDoes) {
  SampleRng rng(1, 2, 0, 0);
  const kernels::Window drawn = RandomResizedCropWindow(45, 45, rng, 0.25, 0.25, 1.0, 1.0);
  EXPECT_EQ(drawn.w, 22);
  EXPECT_EQ(drawn.h, 22);
  const kernels::Window fallback = RandomResizedCropWindow(30, 3, rng, 0.5, 1.0, 1.5, 1.5);
  EXPECT_EQ(fallback.w, 4);
  EXPECT_EQ(fallback.h, 3);
  EXPECT_EQ(fallback.x, 13);
  EXPECT_EQ(fallback.y, 0);
}

TEST(Resize, KeepsAConstantImageConstant) {
  Tensor flat = Tensor::Allocate(DType::kUInt8, Shape{1, 8, 8, 3});
  std::memset(flat.raw_data(), 77, flat.byte_size());
  const OpSpec resize = Op("resize", {{"size", {3, 5}}});
  const ColumnSpec spec{"image", DType::kUInt8, Shape{8, 8, 3}};
  ASSERT_OK_AND_ASSIGN(Tensor b, testing::RunKernel(resize, spec, flat));
  EXPECT_EQ(b.shape(), (Shape{1, 3, 5, 3}));
  for (int i = 0; i < 45; ++i) EXPECT_EQ(b.data<uint8_t>()[i], 77);
}

}  // namespace
}  // namespace sluice::ops
