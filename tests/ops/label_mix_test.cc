// one_hot, mixup and cutmix through real pipelines: each mixed sample is
// checked against its two sources (sample i and i-1 of the batch) with the
// lam its label reveals, so the test does not share the op's arithmetic.
#include <cmath>
#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/core/status_macros.h"
#include "sluice/exec/pipeline.h"
#include "sluice/pipeline_builder.h"
#include "status_matchers.h"

namespace sluice::ops {
namespace {

using ::sluice::testing::StatusIs;
using ::testing::HasSubstr;

constexpr int kSamples = 4800, kBatch = 16, kClasses = 10, kC = 3, kH = 8, kW = 6;
constexpr int kPixels = kC * kH * kW;

// Sample s: image values s * 1000 + i, label s % 10 (two neighbours always differ).
float Value(int s, int i) { return static_cast<float>(s * 1000 + i); }

PipelineBuilder Source(std::vector<int64_t> image_shape, int samples = kSamples) {
  std::vector<float> images;
  std::vector<int64_t> labels;
  for (int s = 0; s < samples; ++s) {
    for (int i = 0; i < kPixels; ++i) images.push_back(Value(s, i));
    labels.push_back(s % kClasses);
  }
  return PipelineBuilder::Arrays(
      {MakeArrayColumn("image", std::move(image_shape), images), MakeArrayColumn("label", {}, labels)});
}

absl::StatusOr<std::vector<Batch>> RunAll(const PipelineDef& def) {
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<exec::Pipeline> p, exec::Pipeline::Create(def));
  auto it = p->Iterate();
  std::vector<Batch> out;
  while (true) {
    Batch b;
    bool end = false;
    SLUICE_RETURN_IF_ERROR(it->Next(&b, &end));
    if (end) return out;
    out.push_back(std::move(b));
  }
}

// The batch's lam, from row 0's label: lam on its own class, 1 - lam on
// the class of the batch's last row.
double LamOf(const Batch& b, int first_sample) { return b.columns[1].values.data<float>()[first_sample % kClasses]; }

void ExpectMixedLabels(const Batch& b, int first, double lam) {
  const float* labels = b.columns[1].values.data<float>();
  for (int r = 0; r < kBatch; ++r) {
    const int prev = first + (r + kBatch - 1) % kBatch;
    const float* l = labels + r * kClasses;
    double sum = 0;
    for (int k = 0; k < kClasses; ++k) sum += l[k];
    EXPECT_NEAR(sum, 1.0, 1e-6);
    EXPECT_NEAR(l[(first + r) % kClasses], lam, 1e-6) << "row " << r;
    EXPECT_NEAR(l[prev % kClasses], 1 - lam, 1e-6) << "row " << r;
  }
}

TEST(MixUp, EachSampleIsLamOfItselfAndTheRestOfTheOneBefore) {
  ASSERT_OK_AND_ASSIGN(std::vector<Batch> batches,
                       RunAll(Source({kC, kH, kW})
                                  .Batch(kBatch)
                                  .Map({Op("mixup", {{"num_classes", kClasses}, {"alpha", 1.0}})})
                                  .Seed(5)
                                  .Build()));
  ASSERT_EQ(batches.size(), static_cast<size_t>(kSamples / kBatch));
  double sum = 0, sq = 0;
  for (size_t n = 0; n < batches.size(); ++n) {
    const Batch& b = batches[n];
    const int first = static_cast<int>(n) * kBatch;
    const double lam = LamOf(b, first);
    sum += lam, sq += lam * lam;
    ExpectMixedLabels(b, first, lam);
    const float* images = b.columns[0].values.data<float>();
    for (int r = 0; r < kBatch; ++r) {
      const int s = first + r, prev = first + (r + kBatch - 1) % kBatch;
      for (int i = 0; i < kPixels; i += 7) {
        const double want = lam * Value(s, i) + (1 - lam) * Value(prev, i);
        ASSERT_NEAR(images[r * kPixels + i], want, 1e-6 * std::abs(want) + 1e-3) << "batch " << n << " row " << r;
      }
    }
  }
  // Beta(1, 1) is uniform: mean 1/2, variance 1/12, within 5 standard errors over 300 batches.
  const double mean = sum / batches.size(), var = sq / batches.size() - mean * mean;
  EXPECT_NEAR(mean, 0.5, 5 * std::sqrt(1.0 / 12 / batches.size()));
  EXPECT_NEAR(var, 1.0 / 12, 5 * std::sqrt(1.0 / 80 / batches.size()));
}

// Where image r of `b` took sample prev's values: must be one box, the same
// in every channel; returns its area.
int BoxArea(const float* image, int s, int prev, bool chw) {
  int area = 0, x1 = kW, y1 = kH, x2 = -1, y2 = -1;
  for (int y = 0; y < kH; ++y) {
    for (int x = 0; x < kW; ++x) {
      int from_prev = 0;
      for (int c = 0; c < kC; ++c) {
        const int i = chw ? (c * kH + y) * kW + x : (y * kW + x) * kC + c;
        EXPECT_TRUE(image[i] == Value(s, i) || image[i] == Value(prev, i)) << "element " << i;
        from_prev += image[i] == Value(prev, i);
      }
      EXPECT_TRUE(from_prev == 0 || from_prev == kC) << "pixel " << y << "," << x << " is mixed across channels";
      if (from_prev == 0) continue;
      ++area;
      x1 = std::min(x1, x), y1 = std::min(y1, y), x2 = std::max(x2, x), y2 = std::max(y2, y);
    }
  }
  if (area > 0) {
    EXPECT_EQ(area, (x2 - x1 + 1) * (y2 - y1 + 1)) << "not a box";
  }
  return area;
}

TEST(CutMix, PastesOneBoxOfTheSampleBeforeAndMixesLabelsByArea) {
  for (const char* layout : {"CHW", "HWC"}) {
    SCOPED_TRACE(layout);
    const bool chw = std::string(layout) == "CHW";
    ASSERT_OK_AND_ASSIGN(
        std::vector<Batch> batches,
        RunAll(Source(chw ? std::vector<int64_t>{kC, kH, kW} : std::vector<int64_t>{kH, kW, kC}, 40 * kBatch)
                   .Batch(kBatch)
                   .Map({Op("cutmix", {{"num_classes", kClasses}, {"layout", layout}})})
                   .Build()));
    int boxed = 0;
    for (size_t n = 0; n < batches.size(); ++n) {
      const Batch& b = batches[n];
      const int first = static_cast<int>(n) * kBatch;
      const double lam = LamOf(b, first);
      ExpectMixedLabels(b, first, lam);
      const float* images = b.columns[0].values.data<float>();
      int area0 = -1;
      for (int r = 0; r < kBatch; ++r) {
        const int area = BoxArea(images + r * kPixels, first + r, first + (r + kBatch - 1) % kBatch, chw);
        if (area0 < 0) area0 = area;
        EXPECT_EQ(area, area0) << "one box per batch";
        EXPECT_NEAR(area, (1 - lam) * kH * kW, 1e-4) << "the label's lam is the share kept";
      }
      boxed += area0 > 0;
    }
    EXPECT_GT(boxed, 20);  // most batches paste a box
  }
}

TEST(MixUp, WithPZeroOrAfterCutMixKeepsLabelsDistributions) {
  ASSERT_OK_AND_ASSIGN(std::vector<Batch> plain, RunAll(Source({kC, kH, kW}, 2 * kBatch)
                                                            .Batch(kBatch)
                                                            .Map({Op("mixup", {{"num_classes", kClasses}, {"p", 0.0}})})
                                                            .Build()));
  for (size_t n = 0; n < plain.size(); ++n) {  // images as they were, labels one-hot
    const int first = static_cast<int>(n) * kBatch;
    EXPECT_EQ(plain[n].columns[0].values.data<float>()[kPixels + 5], Value(first + 1, 5));
    const float* l = plain[n].columns[1].values.data<float>();
    for (int k = 0; k < kClasses; ++k) EXPECT_EQ(l[k], k == first % kClasses ? 1.f : 0.f);
  }
  // cutmix's soft labels go on through mixup: still distributions.
  ASSERT_OK_AND_ASSIGN(
      std::vector<Batch> both,
      RunAll(Source({kC, kH, kW}, 4 * kBatch)
                 .Batch(kBatch)
                 .Map({Op("cutmix", {{"num_classes", kClasses}}), Op("mixup", {{"num_classes", kClasses}})})
                 .Build()));
  for (const Batch& b : both) {
    for (int r = 0; r < kBatch; ++r) {
      double sum = 0;
      for (int k = 0; k < kClasses; ++k) sum += b.columns[1].values.data<float>()[r * kClasses + k];
      EXPECT_NEAR(sum, 1.0, 1e-6);
    }
  }
}

TEST(OneHot, WritesOneHotsAndNamesALabelOutOfRange) {
  ASSERT_OK_AND_ASSIGN(
      std::vector<Batch> batches,
      RunAll(Source({kPixels}, 20).Map({Op("one_hot", {{"num_classes", kClasses}})}).Batch(20).Build()));
  const float* l = batches[0].columns[1].values.data<float>();
  for (int s = 0; s < 20; ++s)
    for (int k = 0; k < kClasses; ++k) EXPECT_EQ(l[s * kClasses + k], k == s % kClasses ? 1.f : 0.f);
  EXPECT_THAT(RunAll(Source({kPixels}, 20).Map({Op("one_hot", {{"num_classes", 5}})}).Batch(20).Build()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, AllOf(HasSubstr("label 5 of"), HasSubstr("[0, 5)"))));
}

TEST(MixUp, BadPipelinesNameWhatIsWrong) {
  EXPECT_THAT(RunAll(Source({kPixels}, 32).Map({Op("mixup", {{"num_classes", kClasses}})}).Batch(16).Build()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("mixup")));
  EXPECT_THAT(
      RunAll(
          Source({kPixels}, 32).Batch(16).Map({Op("mixup", {{"num_classes", kClasses}, {"label", "class"}})}).Build())
          .status(),
      StatusIs(absl::StatusCode::kInvalidArgument, AllOf(HasSubstr("'label'"), HasSubstr("'class'"))));
  EXPECT_THAT(RunAll(Source({kPixels}, 32).Batch(16).Map({Op("cutmix", {{"num_classes", kClasses}})}).Build()).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("[C,H,W]")));
}

}  // namespace
}  // namespace sluice::ops
