// The decode ops on the cuda backend (nvJPEG): JPEG bytes batched on the
// host, RGB images of the output size on the device. Against the cpu
// kernel decoding the same files unscaled (dct_scaling off): the same
// windows for the same seed, pixels within the IDCTs' differences; the
// images nvJPEG does not take decoded on the CPU within the same batch and
// counted; a corrupt file's error names it. Built only with SLUICE_WITH_CUDA;
// the tests skip, saying why, without nvJPEG or a GPU.
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cuda_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/datagen/synthetic_images.h"
#include "sluice/ops/device_decode_stats.h"
#include "sluice/pipeline_builder.h"
#include "status_matchers.h"
#include "temp_dir.h"

namespace sluice::ops {
namespace {

using cuda_testing::AllBatches;
using cuda_testing::FirstBatch;
using cuda_testing::GpuAvailable;
using cuda_testing::HostBytes;
using datagen::Image;
using ::sluice::testing::StatusIs;
using ::testing::HasSubstr;

// Why the test cannot run here, or OK.
absl::Status Usable() {
  if (!OpRegistry::Global().Runs("decode_image", Backend::kCuda)) {
    return absl::FailedPreconditionError("this build has no nvJPEG (the decode ops have no cuda kernel)");
  }
  return GpuAvailable();
}

class DecodeCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (absl::Status s = Usable(); !s.ok()) GTEST_SKIP() << s.message();
  }

  // Writes the files and a file list naming them; returns the list's path.
  std::string List(const std::vector<std::pair<std::string, std::string>>& files) {
    std::string list;
    for (const auto& [name, bytes] : files) {
      const std::string path = dir_.Join(name);
      testing::WriteFileBytes(path, bytes);
      absl::StrAppend(&list, path, " 0\n");
    }
    const std::string path = dir_.Join("files.list");
    testing::WriteFileBytes(path, list);
    return path;
  }

  // `op` on every file of `list`, in batches of `rows`: on the cpu before
  // the batch (unscaled), and on the device after it. Every batch is
  // compared: the device's work for one overlaps the next's decoding.
  void ExpectBackendsAgree(const std::string& list, int rows, OpSpec op, double mean_levels) {
    OpSpec cpu_op = op;
    cpu_op.attrs.emplace_back("dct_scaling", false);
    ASSERT_OK_AND_ASSIGN(std::vector<Batch> cpu,
                         AllBatches(PipelineBuilder::FileList(list).Map({cpu_op}).Batch(rows).Build()));
    ASSERT_OK_AND_ASSIGN(std::vector<Batch> gpu,
                         AllBatches(PipelineBuilder::FileList(list).Batch(rows).Map({op}, 0, "cuda").Build()));
    ASSERT_EQ(gpu.size(), cpu.size());
    for (size_t b = 0; b < cpu.size(); ++b) {
      const Tensor& want = cpu[b].columns[0].values;
      const Tensor& got = gpu[b].columns[0].values;
      ASSERT_EQ(got.memory_kind(), MemoryKind::kDevice);
      ASSERT_EQ(got.shape(), want.shape());
      ASSERT_OK_AND_ASSIGN(std::vector<uint8_t> back, HostBytes(got));
      const int64_t images = want.shape().dim(0);
      const int64_t per_image = want.byte_size() / images;
      for (int64_t r = 0; r < images; ++r) {
        double sum = 0;
        for (int64_t i = r * per_image; i < (r + 1) * per_image; ++i) sum += std::abs(back[i] - want.raw_data()[i]);
        // A window drawn elsewhere, or another image's pixels, would
        // differ by tens of levels.
        EXPECT_LE(sum / per_image, mean_levels) << op.op << ", batch " << b << ", image " << r;
      }
    }
  }

  testing::TempDir dir_;
};

std::string Jpeg(const Image& image, bool progressive = false) {
  absl::StatusOr<std::string> bytes = datagen::EncodeJpeg(image, 90, progressive);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return *bytes;
}

TEST_F(DecodeCudaTest, DecodesAsTheCpuDoesInTheSameWindows) {
  std::vector<std::pair<std::string, std::string>> files;
  for (int i = 0; i < 20; ++i) {
    // Odd sizes: chroma planes of half-pixel widths, partial MCUs.
    files.emplace_back(absl::StrCat(i, ".jpg"), Jpeg(datagen::PhotoLikeImage(333 + 17 * i, 250 - 9 * i, i)));
  }
  files.emplace_back("gray.jpg", Jpeg(datagen::ToGray(datagen::PhotoLikeImage(200, 150, 9))));
  files.emplace_back("progressive.jpg", Jpeg(datagen::PhotoLikeImage(320, 240, 10), true));
  files.emplace_back("wide.jpg", Jpeg(datagen::PhotoLikeImage(1900, 120, 11)));  // wider than the rest together
  const std::string list = List(files);
  for (const int rows : {8, 24}) {  // three batches; one
    ExpectBackendsAgree(list, rows, Op("decode_image", {{"size", {224}}}), 2.0);
    ExpectBackendsAgree(list, rows, Op("decode_random_resized_crop", {{"size", {224}}}), 2.0);
    ExpectBackendsAgree(list, rows, Op("decode_resize_center_crop", {{"resize", 256}, {"crop", {224}}}), 2.0);
  }
}

TEST_F(DecodeCudaTest, ATinyImageEnlargedDiffersOnlyByTheDecodersChromaUpsampling) {
  // 9x7 pixels to 224: the decoders' chroma upsampling (libjpeg-turbo's
  // smooth one, nvJPEG's own) differs by a few levels on a 5x4 chroma
  // plane, and the 25x enlargement spreads that over the image (measured
  // on an H200: 5.2 levels); another image or a misplaced window differs
  // by tens.
  const std::string list = List({{"tiny.jpg", Jpeg(datagen::PhotoLikeImage(9, 7, 12))}});
  ExpectBackendsAgree(list, 1, Op("decode_image", {{"size", {224}}}), 8.0);
  ExpectBackendsAgree(list, 1, Op("decode_resize_center_crop", {{"resize", 256}, {"crop", {224}}}), 8.0);
}

TEST_F(DecodeCudaTest, WhatNvjpegDoesNotTakeIsDecodedOnTheCpuInTheSameBatch) {
  const Image rgb = datagen::PhotoLikeImage(160, 120, 4);
  absl::StatusOr<std::string> png = datagen::EncodePng(rgb);
  ASSERT_TRUE(png.ok());
  const std::string ppm =
      absl::StrCat("P6\n", rgb.width, " ", rgb.height, "\n255\n", std::string(rgb.pixels.begin(), rgb.pixels.end()));
  const std::string list = List({{"a.jpg", Jpeg(rgb)},
                                 {"b.png", *png},
                                 {"c.jpg", Jpeg(datagen::ToCmyk(rgb))},
                                 {"d.ppm", ppm},
                                 {"e.jpg", Jpeg(datagen::PhotoLikeImage(100, 80, 5))}});
  const DeviceDecodeStats before = GetDeviceDecodeStats();
  ExpectBackendsAgree(list, 5, Op("decode_random_resized_crop", {{"size", {64}}}), 2.0);
  const DeviceDecodeStats after = GetDeviceDecodeStats();
  EXPECT_EQ(after.hardware + after.cuda + after.cpu - before.hardware - before.cuda - before.cpu, 5);
  EXPECT_GE(after.cpu - before.cpu, 3) << "the PNG, the CMYK JPEG and the netpbm file";
  EXPECT_LE(after.cpu - before.cpu, 4);
  EXPECT_FALSE(after.decoder.empty());
}

TEST_F(DecodeCudaTest, ACorruptFileFailsNamingIt) {
  std::string bytes = Jpeg(datagen::PhotoLikeImage(64, 48, 7));
  for (size_t i = 20; i < 80; ++i) bytes[i] = static_cast<char>(0x7f);  // the tables after the header
  const std::string list = List({{"ok.jpg", Jpeg(datagen::PhotoLikeImage(64, 48, 8))}, {"garbled.jpg", bytes}});
  EXPECT_THAT(
      FirstBatch(
          PipelineBuilder::FileList(list).Batch(2).Map({Op("decode_image", {{"size", {48, 64}}})}, 0, "cuda").Build()),
      StatusIs(absl::StatusCode::kDataLoss, HasSubstr(dir_.Join("garbled.jpg"))));
}

}  // namespace
}  // namespace sluice::ops
