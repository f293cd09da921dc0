// The decode ops against PIL (tests/ops/pil_reference.py under Debian's
// /usr/bin/python3, as torchvision uses it), and the fused random resized
// crop against decoding first and cropping after.
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/core/status_macros.h"
#include "sluice/datagen/synthetic_images.h"
#include "sluice/exec/pipeline.h"
#include "sluice/pipeline_builder.h"
#include "status_matchers.h"
#include "temp_dir.h"

namespace sluice::ops {
namespace {

using datagen::Image;
using ::sluice::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

struct Diff {
  int max = 0;
  double mean = 0;
};

Diff Compare(const std::string& a, const std::string& b) {
  Diff d;
  EXPECT_EQ(a.size(), b.size());
  const size_t n = std::min(a.size(), b.size());
  double sum = 0;
  for (size_t i = 0; i < n; ++i) {
    const int e = std::abs(static_cast<uint8_t>(a[i]) - static_cast<uint8_t>(b[i]));
    d.max = std::max(d.max, e);
    sum += e;
  }
  d.mean = n ? sum / n : 0;
  return d;
}

// A binary netpbm file of the image (P5 gray, P6 RGB), with a comment in
// its header as other writers put there.
std::string Netpbm(const Image& image) {
  return absl::StrCat(image.channels == 1 ? "P5" : "P6", "\n# made by a test\n", image.width, " ", image.height,
                      "\n255\n", std::string(image.pixels.begin(), image.pixels.end()));
}

class DecodeTest : public ::testing::Test {
 protected:
  // Writes `bytes` as <name> and returns its path.
  std::string Write(const std::string& name, const std::string& bytes) {
    const std::string path = dir_.Join(name);
    testing::WriteFileBytes(path, bytes);
    return path;
  }

  std::string Jpeg(const std::string& name, const Image& image, bool progressive = false) {
    absl::StatusOr<std::string> bytes = datagen::EncodeJpeg(image, 90, progressive);
    EXPECT_TRUE(bytes.ok()) << bytes.status();
    return Write(name, *bytes);
  }

  // PIL's answer for `path` (see pil_reference.py for the modes).
  static std::string Pil(const std::string& path, const std::string& mode) {
    const std::string out = path + ".pil";
    const std::string cmd = std::string("/usr/bin/python3 ") + std::getenv("SLUICE_SOURCE_DIR") +
                            "/tests/ops/pil_reference.py " + path + " " + out + " " + mode;
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    return testing::ReadFileBytes(out);
  }

  // The image column of `ops` applied to the one file at `path`, as bytes.
  absl::StatusOr<std::string> Sluice(const std::string& path, std::vector<OpSpec> ops) {
    const std::string list = path + ".list";
    testing::WriteFileBytes(list, path + " 0\n");
    PipelineBuilder b = PipelineBuilder::FileList(list);
    for (OpSpec& op : ops) b.Map({std::move(op)});
    return Run(b.Build());
  }

  static absl::StatusOr<std::string> Run(const PipelineDef& def) {
    SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<exec::Pipeline> pipeline, exec::Pipeline::Create(def));
    auto it = pipeline->Iterate();
    std::string out;
    while (true) {
      Batch b;
      bool end = false;
      SLUICE_RETURN_IF_ERROR(it->Next(&b, &end));
      if (end) break;
      const Tensor& t = b.columns[0].values;
      out.append(reinterpret_cast<const char*>(t.raw_data()), t.byte_size());
    }
    return out;
  }

  testing::TempDir dir_;
};

TEST_F(DecodeTest, DecodesLikePilWhateverTheEncoding) {
  const Image rgb = datagen::PhotoLikeImage(320, 240, 3);
  struct Case {
    std::string path;
    int tolerance;
  };
  absl::StatusOr<std::string> png = datagen::EncodePng(rgb);
  ASSERT_TRUE(png.ok());
  const std::vector<Case> cases = {
      {Jpeg("baseline.jpg", rgb), 1},
      {Jpeg("progressive.jpg", rgb, true), 1},
      {Jpeg("gray.jpg", datagen::ToGray(rgb)), 1},
      {Jpeg("cmyk.jpg", datagen::ToCmyk(rgb)), 2},  // integer rounding of the CMYK product
      {Write("lossless.png", *png), 0},
      {Write("raw.ppm", Netpbm(rgb)), 0},
      {Write("raw_gray.pgm", Netpbm(datagen::ToGray(rgb))), 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.path);
    ASSERT_OK_AND_ASSIGN(std::string ours, Sluice(c.path, {Op("decode_image", {{"size", {240, 320}}})}));
    const Diff d = Compare(ours, Pil(c.path, "decode"));
    EXPECT_LE(d.max, c.tolerance);
  }
}

TEST_F(DecodeTest, ResizingMatchesPilsAntialiasedBilinear) {
  const std::string path = Jpeg("a.jpg", datagen::PhotoLikeImage(320, 240, 4));
  ASSERT_OK_AND_ASSIGN(std::string ours,
                       Sluice(path, {Op("decode_image", {{"size", {90, 150}}, {"dct_scaling", false}})}));
  // PIL rounds to 8 bits between its two passes; sluice keeps floats.
  const Diff d = Compare(ours, Pil(path, "resize 150 90"));
  EXPECT_LE(d.max, 2);
  EXPECT_LT(d.mean, 0.3);
}

TEST_F(DecodeTest, TheEvaluationCropMatchesTorchvisionsResizeAndCenterCrop) {
  const std::string path = Jpeg("big.jpg", datagen::PhotoLikeImage(700, 520, 5));
  const std::string pil = Pil(path, "resize_center_crop 128 112");
  ASSERT_OK_AND_ASSIGN(
      std::string exact,
      Sluice(path, {Op("decode_resize_center_crop", {{"resize", 128}, {"crop", {112}}, {"dct_scaling", false}})}));
  Diff d = Compare(exact, pil);
  EXPECT_LE(d.max, 2);
  EXPECT_LT(d.mean, 0.3);
  // Decoding at 1/4 size in the DCT (520 / 4 >= 112) changes pixels a little.
  ASSERT_OK_AND_ASSIGN(std::string scaled,
                       Sluice(path, {Op("decode_resize_center_crop", {{"resize", 128}, {"crop", {112}}})}));
  d = Compare(scaled, pil);
  EXPECT_LT(d.mean, 2.0);
}

// A size no multiple of the DCT's scale: its decoded pixels are blocks of
// `denom` source pixels, the last partly past the edge. Mapped as
// output_width / width, the image was stretched (mean 4.3 off, max 37).
TEST_F(DecodeTest, DctScalingOfASizeNoMultipleOfTheScaleStaysInPlace) {
  const std::string path = Jpeg("odd.jpg", datagen::PhotoLikeImage(457, 301, 6));
  ASSERT_OK_AND_ASSIGN(std::string scaled, Sluice(path, {Op("decode_image", {{"size", {50, 60}}})}));
  const Diff d = Compare(scaled, Pil(path, "resize 60 50"));
  EXPECT_LT(d.mean, 1.2);
  EXPECT_LE(d.max, 12);
}

// A sawtooth across the rows and columns: an edge read wrong shows.
datagen::Image Stripes(int width, int height) {
  datagen::Image img{width, height, 3, std::vector<uint8_t>(static_cast<size_t>(width) * height * 3)};
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      uint8_t* p = &img.pixels[(static_cast<size_t>(y) * width + x) * 3];
      p[0] = static_cast<uint8_t>(x * 7 % 256), p[1] = static_cast<uint8_t>(y * 5 % 256);
      p[2] = static_cast<uint8_t>((x / 16 + y / 16) % 2 * 255);
    }
  }
  return img;
}

// Shrinking 376 x 493 to 8 or 32 the filter reaches 12 to 47 rows past the
// crop: decoded one row past it, its first and last rows were 9 to 20
// levels off.
TEST_F(DecodeTest, TheEvaluationCropsEdgesSeeAsFarAsTheFilterReaches) {
  const std::string path = Jpeg("stripes.jpg", Stripes(376, 493));
  for (int size : {8, 32}) {
    ASSERT_OK_AND_ASSIGN(
        std::string ours,
        Sluice(path, {Op("decode_resize_center_crop", {{"resize", size}, {"crop", {size}}, {"dct_scaling", false}})}));
    EXPECT_LE(Compare(ours, Pil(path, absl::StrCat("resize_center_crop ", size, " ", size))).max, 2) << size;
  }
}

// RandomResizedCrop crops, then resizes: the filter reads nothing past the
// crop's edges (it read past them, as PIL's resize(box=...) does, and the
// edge columns were up to 12 levels off torchvision's).
TEST_F(DecodeTest, ARandomResizedCropReadsNothingPastItsEdges) {
  const std::string path = Jpeg("stripes.jpg", Stripes(480, 360));
  // At scale 1 and ratio 1 no draw fits: the centred square, 360 wide at 60.
  const std::string pil = Pil(path, "crop_resize 60 0 360 360 48 48");
  for (const OpSpec& op : {Op("decode_random_resized_crop",
                              {{"size", {48}}, {"scale", {1.0, 1.0}}, {"ratio", {1.0, 1.0}}, {"dct_scaling", false}}),
                           Op("random_resized_crop", {{"size", {48}}, {"scale", {1.0, 1.0}}, {"ratio", {1.0, 1.0}}})}) {
    std::vector<OpSpec> ops = {op};
    if (op.op == "random_resized_crop") ops.insert(ops.begin(), Op("decode_image", {{"size", {360, 480}}}));
    ASSERT_OK_AND_ASSIGN(std::string ours, Sluice(path, ops));
    EXPECT_LE(Compare(ours, pil).max, 2) << op.op;
  }
}

TEST_F(DecodeTest, TheFusedRandomResizedCropEqualsDecodingThenCropping) {
  const Image img = datagen::PhotoLikeImage(480, 360, 6);
  for (int i = 0; i < 6; ++i) Jpeg("img" + std::to_string(i) + ".jpg", img, i % 2 == 1);
  std::string list;
  for (int i = 0; i < 6; ++i) absl::StrAppend(&list, "img", i, ".jpg ", i, "\n");
  testing::WriteFileBytes(dir_.Join("list.txt"), list);
  // decode_random_resized_crop draws as random_resized_crop: the same windows.
  auto pipeline = [&]() { return PipelineBuilder::FileList(dir_.Join("list.txt")).Seed(11); };
  const OpSpec crop = Op("random_resized_crop", {{"size", {96, 128}}, {"scale", {0.05, 0.6}}});
  ASSERT_OK_AND_ASSIGN(std::string two_steps, Run(pipeline()
                                                      .Map({Op("decode_image", {{"size", {360, 480}}})})
                                                      .Named("decode")
                                                      .Map({crop})
                                                      .Named("crop")
                                                      .Build()));
  ASSERT_OK_AND_ASSIGN(std::string fused,
                       Run(pipeline()
                               .Map({Op("decode_random_resized_crop",
                                        {{"size", {96, 128}}, {"scale", {0.05, 0.6}}, {"dct_scaling", false}})})
                               .Named("crop")
                               .Build()));
  Diff d = Compare(fused, two_steps);
  EXPECT_LE(d.max, 1);
  ASSERT_OK_AND_ASSIGN(std::string scaled,
                       Run(pipeline()
                               .Map({Op("decode_random_resized_crop", {{"size", {96, 128}}, {"scale", {0.05, 0.6}}})})
                               .Named("crop")
                               .Build()));
  d = Compare(scaled, two_steps);
  EXPECT_LT(d.mean, 2.5);
  EXPECT_NE(fused, std::string(fused.size(), '\0'));
}

// Netpbm decoding copies only the crop's window: the crops must be those
// of the same pixels decoded whole from a PNG.
TEST_F(DecodeTest, RawNetpbmPixelsCropAsTheSamePixelsInAPng) {
  const Image img = datagen::PhotoLikeImage(333, 251, 9);
  absl::StatusOr<std::string> png = datagen::EncodePng(img);
  ASSERT_TRUE(png.ok());
  std::string pngs, ppms;
  for (int i = 0; i < 8; ++i) {
    Write("c" + std::to_string(i) + ".png", *png);
    Write("c" + std::to_string(i) + ".ppm", Netpbm(img));
    absl::StrAppend(&pngs, "c", i, ".png ", i, "\n");
    absl::StrAppend(&ppms, "c", i, ".ppm ", i, "\n");
  }
  testing::WriteFileBytes(dir_.Join("pngs.txt"), pngs);
  testing::WriteFileBytes(dir_.Join("ppms.txt"), ppms);
  for (const OpSpec& op : {Op("decode_random_resized_crop", {{"size", {64, 80}}, {"scale", {0.02, 0.5}}}),
                           Op("decode_resize_center_crop", {{"resize", 100}, {"crop", {90}}})}) {
    SCOPED_TRACE(op.op);
    auto crops = [&](const std::string& list) {
      return Run(PipelineBuilder::FileList(dir_.Join(list)).Seed(3).Map({op}).Named("crop").Build());
    };
    ASSERT_OK_AND_ASSIGN(std::string from_png, crops("pngs.txt"));
    ASSERT_OK_AND_ASSIGN(std::string from_ppm, crops("ppms.txt"));
    // The window's offset in the copied region rounds the source
    // coordinates apart by a float's last bit, which can move a fixed-point
    // filter weight by one step: a level or two, rarely (a window off by
    // a pixel would differ everywhere).
    const Diff d = Compare(from_png, from_ppm);
    EXPECT_LE(d.max, 2);
    EXPECT_LT(d.mean, 0.01);
  }
}

TEST_F(DecodeTest, DecodingStraightIntoTheNormalizationChangesNoValue) {
  std::string list;
  for (int i = 0; i < 8; ++i) {
    Jpeg("n" + std::to_string(i) + ".jpg", datagen::PhotoLikeImage(300 + 20 * i, 220, 20 + i), i % 3 == 2);
    absl::StrAppend(&list, "n", i, ".jpg ", i, "\n");
  }
  testing::WriteFileBytes(dir_.Join("list.txt"), list);
  struct Case {
    OpSpec decode;
    std::string dtype, layout;
  };
  const std::vector<Case> cases = {
      {Op("decode_random_resized_crop", {{"size", {72, 96}}}), "float32", "CHW"},
      {Op("decode_random_resized_crop", {{"size", {72, 96}}}), "float16", "CHW"},
      {Op("decode_resize_center_crop", {{"resize", 80}, {"crop", {64}}}), "uint8", "CHW"},
      {Op("decode_image", {{"size", {50, 70}}}), "float32", "HWC"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.decode.op + " " + c.dtype + " " + c.layout);
    auto pipeline = [&](bool fuse) {
      PipelineDef def =
          PipelineBuilder::FileList(dir_.Join("list.txt"))
              .Seed(5)
              .Map({c.decode, Op("crop_mirror_normalize", {{"mirror", 0.5}, {"dtype", c.dtype}, {"layout", c.layout}})})
              .Build();
      def.mutable_options()->set_no_fuse_decode(!fuse);
      return def;
    };
    ASSERT_OK_AND_ASSIGN(auto fused_pipeline, exec::Pipeline::Create(pipeline(true)));
    ASSERT_EQ(fused_pipeline->compiled().nodes[1].ops.size(), 1u);
    EXPECT_EQ(fused_pipeline->compiled().nodes[1].ops[0].name, "fused(" + c.decode.op + "+crop_mirror_normalize)");
    ASSERT_OK_AND_ASSIGN(std::string fused, Run(pipeline(true)));
    ASSERT_OK_AND_ASSIGN(std::string apart, Run(pipeline(false)));
    EXPECT_EQ(fused.size(), apart.size());
    EXPECT_TRUE(fused == apart) << "the fused kernel's values differ";
  }
}

TEST_F(DecodeTest, CorruptImagesFailNamingTheFile) {
  std::string bytes = testing::ReadFileBytes(Jpeg("ok.jpg", datagen::PhotoLikeImage(64, 48, 7)));
  for (size_t i = 20; i < 80; ++i) bytes[i] = static_cast<char>(0x7f);  // the tables after the header
  const std::string garbled = Write("garbled.jpg", bytes);
  EXPECT_THAT(Sluice(garbled, {Op("decode_image", {{"size", {48, 64}}})}),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr(garbled)));
  const std::string text = Write("text.jpg", "this is not an image, only text ending in FF D9 \xff\xd9");
  EXPECT_THAT(
      Sluice(text, {Op("decode_image", {{"size", {48, 64}}})}),
      StatusIs(absl::StatusCode::kDataLoss,
               HasSubstr("not a JPEG, PNG, WebP or binary netpbm (P5, P6) file (the formats the decode ops read) in " +
                         text)));
  const std::string ppm = Netpbm(datagen::PhotoLikeImage(64, 48, 7));
  const std::string truncated = Write("truncated.ppm", ppm.substr(0, ppm.size() - 1));
  EXPECT_THAT(Sluice(truncated, {Op("decode_image", {{"size", {48, 64}}})}),
              StatusIs(absl::StatusCode::kDataLoss,
                       AllOf(HasSubstr(truncated), HasSubstr("truncated netpbm image: 64x48x3 needs 9216 pixel "
                                                             "bytes, has 9215"))));
  const std::string deep = Write("deep.pgm", "P5 4 4 65535\n" + std::string(32, '\0'));
  EXPECT_THAT(Sluice(deep, {Op("decode_image", {{"size", {4, 4}}})}),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("maxval 65535: only 8-bit")));
  const std::string huge = Write("huge.pgm", "P5 10000000001 1 255\n" + std::string(64, 'x'));
  EXPECT_THAT(Sluice(huge, {Op("decode_image", {{"size", {4, 4}}})}),
              StatusIs(absl::StatusCode::kDataLoss, AllOf(HasSubstr(huge), HasSubstr("malformed header"))));
  const std::string not_netpbm = Write("p5x.pgm", "P5x" + std::string(64, 'x'));
  EXPECT_THAT(Sluice(not_netpbm, {Op("decode_image", {{"size", {4, 4}}})}),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("not a JPEG, PNG, WebP or binary netpbm (P5, P6) file")));
  const std::string headless = Write("headless.ppm", "P6 12\n" + std::string(64, 'x'));
  EXPECT_THAT(Sluice(headless, {Op("decode_image", {{"size", {4, 4}}})}),
              StatusIs(absl::StatusCode::kDataLoss, AllOf(HasSubstr(headless), HasSubstr("malformed header"))));
}

// A header that claims a huge image is refused from the header alone: no
// pixel buffer is sized from it (a forged 60000 x 60000 JPEG would claim
// 10 GB).
TEST_F(DecodeTest, AnImageLargerThanMaxPixelsIsRefusedBeforeDecoding) {
  std::string bytes = testing::ReadFileBytes(Jpeg("small.jpg", datagen::PhotoLikeImage(16, 12, 3)));
  const size_t sof = bytes.find("\xff\xc0");
  ASSERT_NE(sof, std::string::npos);
  for (size_t at : {sof + 5, sof + 7}) {  // height, then width: big-endian 60000
    bytes[at] = static_cast<char>(60000 >> 8);
    bytes[at + 1] = static_cast<char>(60000 & 0xff);
  }
  const std::string huge = Write("huge.jpg", bytes);
  EXPECT_THAT(Sluice(huge, {Op("decode_image", {{"size", {48, 64}}})}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("image of 60000 x 60000 pixels is larger than max_pixels (100000000)")));
  EXPECT_THAT(Sluice(huge, {Op("decode_image", {{"size", {48, 64}}})}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(huge)));
  const std::string small = dir_.Join("small.jpg");
  EXPECT_THAT(Sluice(small, {Op("decode_random_resized_crop", {{"size", {8}}, {"max_pixels", 191}})}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("image of 16 x 12 pixels is larger")));
  SLUICE_EXPECT_OK(Sluice(small, {Op("decode_image", {{"size", {8}}, {"max_pixels", 192}})}).status());
}

TEST_F(DecodeTest, BadAttrsAndColumnsAreRefusedWithTheReason) {
  const std::string path = Jpeg("a.jpg", datagen::PhotoLikeImage(64, 48, 8));
  EXPECT_THAT(Sluice(path, {Op("decode_random_resized_crop", {{"scale", {0.5, 2.0}}})}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("scale")));
  EXPECT_THAT(Sluice(path, {Op("decode_image", {{"size", {48, 64}}}), Op("decode_image", {{"size", {48, 64}}})}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("takes encoded image bytes")));
  // A crop past the shorter side after the resize would reach outside the image.
  EXPECT_THAT(Sluice(path, {Op("decode_resize_center_crop", {{"resize", 32}, {"crop", {32, 60}}})}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("crop"), HasSubstr("[32, 60] is larger than the image's shorter side"))));
}

}  // namespace
}  // namespace sluice::ops
