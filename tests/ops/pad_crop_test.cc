// pad and random_crop against torchvision's functional pad (and numpy's pad
// where torch refuses), through tests/ops/torchvision_reference.py under
// Debian's /usr/bin/python3. Pads and crops copy pixels: equal bytes.
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "op_harness.h"
#include "sluice/core/status_macros.h"
#include "sluice/exec/pipeline.h"
#include "sluice/pipeline_builder.h"
#include "status_matchers.h"
#include "temp_dir.h"

namespace sluice::ops {
namespace {

using ::sluice::testing::StatusIs;
using ::testing::HasSubstr;

// An image of distinct-looking noise, so a window is found in one place only.
template <typename T>
std::vector<T> Noise(int64_t h, int64_t w, int64_t c, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<T> v(h * w * c);
  for (T& x : v) x = static_cast<T>(std::is_same_v<T, float> ? (gen() % 100000) / 1000.f : gen() % 256);
  return v;
}

template <typename T>
std::string Bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

class PadCropTest : public ::testing::Test {
 protected:
  // torchvision's answer (see torchvision_reference.py) for `image` of `shape`.
  std::string Reference(const std::string& image, std::vector<int64_t> shape, const std::string& dtype,
                        nlohmann::json spec) {
    return testing::TorchvisionReference(dir_.path(), image, std::move(shape), dtype, std::move(spec));
  }

  // The images (rows of one shape) through `op`, in one batch.
  static absl::StatusOr<Batch> Run(NamedArray images, OpSpec op, int threads = 0, uint64_t seed = 7) {
    int64_t row_bytes = DTypeSize(images.dtype);
    for (int64_t d : images.shape) row_bytes *= d;
    const int64_t rows = static_cast<int64_t>(images.data.size()) / row_bytes;
    PipelineBuilder b = PipelineBuilder::Arrays({std::move(images)});
    b.Map({std::move(op)}).Batch(rows).Seed(seed);
    PipelineDef def = b.Build();
    if (threads > 0) def.mutable_options()->set_threads(threads);
    SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<exec::Pipeline> p, exec::Pipeline::Create(def));
    auto it = p->Iterate();
    Batch out;
    bool end = false;
    SLUICE_RETURN_IF_ERROR(it->Next(&out, &end));
    return out;
  }

  static std::string RowBytes(const Batch& b, int64_t row) {
    const Tensor& t = b.columns[0].values;
    const int64_t n = t.byte_size() / t.shape().dim(0);
    return std::string(reinterpret_cast<const char*>(t.raw_data()) + row * n, n);
  }

  sluice::testing::TempDir dir_;
};

TEST_F(PadCropTest, PadMatchesTorchvisionInEveryMode) {
  struct Case {
    std::vector<int64_t> padding;
    std::string mode;
    std::vector<double> fill;
  };
  const std::vector<Case> cases = {
      {{1, 2, 3, 4}, "constant", {10, 20, 30}},
      {{2}, "constant", {99}},
      {{1, 2, 3, 4}, "edge", {0}},
      {{1, 2, 3, 4}, "reflect", {0}},
      {{3, 1}, "reflect", {0}},
      {{1, 2, 3, 4}, "symmetric", {0}},
      {{9}, "reflect", {0}},  // wider than the image: the reflection repeats (numpy's pad)
      {{11, 0, 0, 6}, "symmetric", {0}},
  };
  // Rows of 21, 120 and 600 bytes: each way a row's run of pixels is copied
  // (the wider in two modes: each reference starts a Python).
  for (const int64_t width : {7, 40, 200}) {
    const std::vector<uint8_t> image = Noise<uint8_t>(5, width, 3, 1);
    for (const Case& c : cases) {
      if (width != 7 && &c != &cases[0] && &c != &cases[3]) continue;
      SCOPED_TRACE(absl::StrCat(width, " wide, ", nlohmann::json(c.padding).dump(), " ", c.mode));
      ASSERT_OK_AND_ASSIGN(Batch b,
                           Run(MakeArrayColumn("image", {5, width, 3}, image),
                               Op("pad", {{"padding", c.padding}, {"padding_mode", c.mode}, {"fill", c.fill}})));
      const std::string want =
          Reference(Bytes(image), {5, width, 3}, "uint8",
                    {{"op", "pad"}, {"padding", c.padding}, {"padding_mode", c.mode}, {"fill", c.fill}});
      const Shape& s = b.columns[0].values.shape();
      ASSERT_EQ(s.rank(), 4);
      EXPECT_EQ(s.dim(1) * s.dim(2) * 3, static_cast<int64_t>(want.size()));
      EXPECT_TRUE(RowBytes(b, 0) == want);
    }
  }
}

TEST_F(PadCropTest, PadsFloatAndOneChannelImages) {
  const std::vector<float> image = Noise<float>(4, 6, 1, 2);
  ASSERT_OK_AND_ASSIGN(Batch b,
                       Run(MakeArrayColumn("image", {4, 6}, image), Op("pad", {{"padding", {2, 1}}, {"fill", 0.25}})));
  EXPECT_EQ(b.columns[0].values.shape(), (Shape{1, 6, 10}));  // [H,W] stays [H,W]
  EXPECT_TRUE(RowBytes(b, 0) ==
              Reference(Bytes(image), {4, 6, 1}, "float32", {{"op", "pad"}, {"padding", {2, 1}}, {"fill", {0.25}}}));
}

// Where `window` (h x w x c bytes) lies in `padded` (ph x pw x c), or (-1, -1).
std::pair<int, int> Find(const std::string& window, const std::string& padded, int h, int w, int ph, int pw, int c) {
  for (int i = 0; i + h <= ph; ++i) {
    for (int j = 0; j + w <= pw; ++j) {
      bool same = true;
      for (int y = 0; y < h && same; ++y) {
        same = std::memcmp(window.data() + y * w * c, padded.data() + ((i + y) * pw + j) * c, w * c) == 0;
      }
      if (same) return {i, j};
    }
  }
  return {-1, -1};
}

TEST_F(PadCropTest, RandomCropIsAWindowOfThePaddedImageAtAUniformPlace) {
  // CIFAR's augmentation on 8x8 images: padding 4 (reflect), size 8: 9 x 9 places.
  const int kRows = 1800;
  const std::vector<uint8_t> one = Noise<uint8_t>(8, 8, 3, 3);
  std::vector<uint8_t> images;
  for (int r = 0; r < kRows; ++r) images.insert(images.end(), one.begin(), one.end());
  const OpSpec crop = Op("random_crop", {{"size", 8}, {"padding", 4}, {"padding_mode", "reflect"}});
  ASSERT_OK_AND_ASSIGN(Batch b, Run(MakeArrayColumn("image", {8, 8, 3}, images), crop));
  ASSERT_EQ(b.columns[0].values.shape(), (Shape{kRows, 8, 8, 3}));
  const std::string padded = Reference(Bytes(one), {8, 8, 3}, "uint8",
                                       {{"op", "random_crop_padded"}, {"padding", {4}}, {"padding_mode", "reflect"}});
  std::map<int, int> tops, lefts;
  for (int r = 0; r < kRows; ++r) {
    const auto [i, j] = Find(RowBytes(b, r), padded, 8, 8, 16, 16, 3);
    ASSERT_GE(i, 0) << "row " << r << " is no window of the padded image";
    ++tops[i];
    ++lefts[j];
  }
  // Each of the 9 offsets per axis: 200 expected, binomial sd 13.3; 5 sd either side.
  ASSERT_EQ(tops.size(), 9u);
  ASSERT_EQ(lefts.size(), 9u);
  for (const auto& [offset, n] : tops) EXPECT_NEAR(n, 200, 67) << "top " << offset;
  for (const auto& [offset, n] : lefts) EXPECT_NEAR(n, 200, 67) << "left " << offset;

  // The same sample gets the same window whatever the thread count.
  ASSERT_OK_AND_ASSIGN(Batch one_thread, Run(MakeArrayColumn("image", {8, 8, 3}, images), crop, 1));
  EXPECT_TRUE(RowBytes(one_thread, 0) == RowBytes(b, 0) && RowBytes(one_thread, kRows - 1) == RowBytes(b, kRows - 1));
  // Another seed, other windows.
  ASSERT_OK_AND_ASSIGN(Batch other, Run(MakeArrayColumn("image", {8, 8, 3}, images), crop, 0, 8));
  int same = 0;
  for (int r = 0; r < 100; ++r) same += RowBytes(other, r) == RowBytes(b, r);
  EXPECT_LT(same, 20);
}

TEST_F(PadCropTest, PadIfNeededPadsAgainAsTorchvisionDoes) {
  // 5x6 padded by 1 (7x8), then short of 10x12: the width by 4 each side,
  // then the height by 3, each a reflection of the image already padded.
  const std::vector<uint8_t> one = Noise<uint8_t>(5, 6, 3, 4);
  const int kRows = 50;
  std::vector<uint8_t> images;
  for (int r = 0; r < kRows; ++r) images.insert(images.end(), one.begin(), one.end());
  ASSERT_OK_AND_ASSIGN(
      Batch b, Run(MakeArrayColumn("image", {5, 6, 3}, images),
                   Op("random_crop",
                      {{"size", {10, 12}}, {"padding", 1}, {"pad_if_needed", true}, {"padding_mode", "reflect"}})));
  ASSERT_EQ(b.columns[0].values.shape(), (Shape{kRows, 10, 12, 3}));
  const std::string padded = Reference(Bytes(one), {5, 6, 3}, "uint8",
                                       {{"op", "random_crop_padded"},
                                        {"padding", {1}},
                                        {"pad_if_needed", true},
                                        {"size", {10, 12}},
                                        {"padding_mode", "reflect"}});
  ASSERT_EQ(padded.size(), 13u * 16 * 3);
  for (int r = 0; r < kRows; ++r) {
    EXPECT_GE(Find(RowBytes(b, r), padded, 10, 12, 13, 16, 3).first, 0) << "row " << r;
  }
}

TEST_F(PadCropTest, BadAttrsNameWhatIsWrong) {
  const NamedArray image = MakeArrayColumn("image", {5, 6, 3}, Noise<uint8_t>(5, 6, 3, 5));
  EXPECT_THAT(Run(image, Op("random_crop", {{"size", 8}, {"padding", 1}})).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("'size'"), HasSubstr("[7, 8]"), HasSubstr("pad_if_needed"))));
  EXPECT_THAT(
      Run(image, Op("pad", {{"padding", 1}, {"fill", {1.0, 2.0}}})).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, AllOf(HasSubstr("'fill'"), HasSubstr("one per channel (3)"))));
  EXPECT_THAT(Run(image, Op("pad", {{"padding", {1, 2, 3}}})).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'padding'")));
  EXPECT_THAT(Run(image, Op("pad", {{"padding", 1}, {"padding_mode", "wrap"}})).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'padding_mode'")));
  EXPECT_THAT(
      Run(MakeArrayColumn("image", {4}, std::vector<int64_t>{1, 2, 3, 4}), Op("pad", {{"padding", 1}})).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("image")));
  // Its index maps were made before any check: 24 GB for a padding of 2e9.
  EXPECT_THAT(Run(image, Op("pad", {{"padding", 2000000000}})).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("'padding' pads a side by 2000000000 pixels; at most 16777216")));
  EXPECT_THAT(Run(image, Op("random_crop", {{"size", 8}, {"padding", {10000000, 0}}})).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("makes the image 5 x 20000006 as padded; at most 16777216 pixels a side")));
}

}  // namespace
}  // namespace sluice::ops
