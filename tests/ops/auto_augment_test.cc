// rand_augment, trivial_augment_wide and auto_augment against torchvision's
// RandAugment, TrivialAugmentWide and AutoAugment. sluice draws from its own
// counter-based RNG, so the test cannot replay torchvision's draws: instead
// each output must be one of the images torchvision's _apply_op makes of
// that input for one of the policy's possible draws (listed by
// tests/ops/torchvision_reference.py), and the draws must cover the policy.
#include <algorithm>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
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
using testing::TorchvisionReference;

constexpr int64_t kH = 20, kW = 24;  // not square: the shears, shifts and rotations see each side

// Images whose every op changes them visibly: noise in [40, 215) (so
// autocontrast stretches it) over a horizontal ramp (so equalize differs).
std::vector<uint8_t> Images(int64_t n, int64_t c) {
  std::mt19937 gen(7);
  std::vector<uint8_t> v;
  for (int64_t i = 0; i < n * kH * kW * c; ++i) {
    const int64_t x = (i / c) % kW;
    v.push_back(static_cast<uint8_t>(40 + (gen() % 120 + x * 2) % 175));
  }
  return v;
}

// For each image, the candidate it is (its name), or "" when none is within
// one level on all but `ties` of its bytes: torch's grid and ours may round
// a nearest-neighbour tie apart.
struct Match {
  std::vector<std::string> names;
};

class AutoAugmentTest : public ::testing::Test {
 protected:
  Match MatchCandidates(const std::vector<uint8_t>& out, const std::vector<uint8_t>& in, int64_t n, int64_t c,
                        nlohmann::json spec, int64_t ties) {
    spec["op"] = "augment_candidates";
    const std::string all =
        TorchvisionReference(dir_.path(), std::string(in.begin(), in.end()), {n, kH, kW, c}, "uint8", std::move(spec));
    const std::vector<std::string> names =
        nlohmann::json::parse(sluice::testing::ReadFileBytes(dir_.path() + "/reference_out.raw.json"));
    const int64_t image = kH * kW * c;
    EXPECT_EQ(static_cast<int64_t>(all.size()), static_cast<int64_t>(names.size()) * n * image);
    Match m;
    for (int64_t i = 0; i < n; ++i) {
      // The candidate with the fewest bytes off by more than a level, then
      // with the fewest off at all (posterize to 7 bits is within a level
      // of the input).
      int64_t best = image + 1, best_differing = image + 1;
      std::string best_name;
      for (size_t k = 0; k < names.size(); ++k) {
        const char* cand = all.data() + (k * n + i) * image;
        int64_t off = 0, differing = 0;
        for (int64_t b = 0; b < image; ++b) {
          const int diff = std::abs(static_cast<int>(static_cast<uint8_t>(cand[b])) - out[i * image + b]);
          off += diff > 1;
          differing += diff > 0;
        }
        if (off < best || (off == best && differing < best_differing)) {
          best = off, best_differing = differing, best_name = names[k];
        }
      }
      EXPECT_LE(best, ties) << "image " << i << ": nearest candidate " << best_name << " is off on " << best << " of "
                            << image << " bytes";
      m.names.push_back(best <= ties ? best_name : "");
    }
    return m;
  }

  sluice::testing::TempDir dir_;
};

// The op of a candidate's name: "Rotate(-8.4)+Equalize(0)" -> "Rotate".
std::string FirstOp(const std::string& name) { return name.substr(0, name.find('(')); }

const ColumnSpec kRgb{"image", DType::kUInt8, Shape{kH, kW, 3}};

TEST_F(AutoAugmentTest, RandAugmentAppliesOneOfTorchvisionsOpsDrawnUniformly) {
  const int64_t n = 200;
  const std::vector<uint8_t> in = Images(n, 3);
  const std::vector<uint8_t> out = RunOp<uint8_t>("rand_augment", R"({"num_ops": 1, "magnitude": 9})", kRgb, in, n);
  const Match m = MatchCandidates(
      out, in, n, 3, {{"policy", "rand_augment"}, {"num_ops", 1}, {"magnitude", 9}, {"num_magnitude_bins", 31}},
      kH * kW * 3 / 200);
  std::map<std::string, int> ops;
  for (const std::string& name : m.names) ++ops[FirstOp(name)];
  // 14 ops, 1/14 each: ~14 of 200, sd 3.6.
  EXPECT_EQ(ops.size(), 14u);
  for (const auto& [op, count] : ops) EXPECT_LE(count, 40) << op;
}

TEST_F(AutoAugmentTest, RandAugmentChainsNumOps) {
  const int64_t n = 24;
  const std::vector<uint8_t> in = Images(n, 3);
  const std::vector<uint8_t> out =
      RunOp<uint8_t>("rand_augment", R"({"num_ops": 2, "magnitude": 5, "num_magnitude_bins": 11})", kRgb, in, n);
  MatchCandidates(out, in, n, 3,
                  {{"policy", "rand_augment"}, {"num_ops", 2}, {"magnitude", 5}, {"num_magnitude_bins", 11}},
                  kH * kW * 3 / 100);
}

TEST_F(AutoAugmentTest, RandAugmentBilinearWithFillAndOneChannel) {
  const int64_t n = 64;
  const std::vector<uint8_t> in = Images(n, 3);
  // Bilinear taps are summed in another order than grid_sample's: within a
  // level, and the one fill level is where torchvision blends it.
  const std::vector<uint8_t> out =
      RunOp<uint8_t>("rand_augment", R"({"num_ops": 1, "interpolation": "bilinear"})", kRgb, in, n);
  MatchCandidates(out, in, n, 3,
                  {{"policy", "rand_augment"},
                   {"num_ops", 1},
                   {"magnitude", 9},
                   {"num_magnitude_bins", 31},
                   {"interpolation", "bilinear"}},
                  0);
  const std::vector<uint8_t> gray = Images(n, 1);
  const ColumnSpec gray_spec{"image", DType::kUInt8, Shape{kH, kW, 1}};
  const std::vector<uint8_t> gray_out =
      RunOp<uint8_t>("rand_augment", R"({"num_ops": 1, "fill": [90]})", gray_spec, gray, n);
  MatchCandidates(
      gray_out, gray, n, 1,
      {{"policy", "rand_augment"}, {"num_ops", 1}, {"magnitude", 9}, {"num_magnitude_bins", 31}, {"fill", {90.0}}},
      kH * kW / 100);
}

TEST_F(AutoAugmentTest, TrivialAugmentWideDrawsOpsAndBins) {
  const int64_t n = 120;
  const std::vector<uint8_t> in = Images(n, 3);
  const std::vector<uint8_t> out =
      RunOp<uint8_t>("trivial_augment_wide", R"({"num_magnitude_bins": 8, "fill": [0, 128, 255]})", kRgb, in, n);
  const Match m = MatchCandidates(
      out, in, n, 3, {{"policy", "trivial_augment_wide"}, {"num_magnitude_bins", 8}, {"fill", {0.0, 128.0, 255.0}}},
      kH * kW * 3 / 100);
  std::map<std::string, int> ops;
  std::set<std::string> draws(m.names.begin(), m.names.end());
  for (const std::string& name : m.names) ++ops[FirstOp(name)];
  EXPECT_GE(ops.size(), 13u);  // 14 ops, 1/14 each of 120: one may be missed 1 time in 50
  // ~150 distinct images (magnitude 0 is the identity for most ops): many
  // magnitudes drawn, not one per op and sign (at most 28).
  EXPECT_GE(draws.size(), 40u);
}

TEST_F(AutoAugmentTest, AutoAugmentFollowsEachPolicy) {
  for (const char* policy : {"imagenet", "cifar10", "svhn"}) {
    SCOPED_TRACE(policy);
    const int64_t n = 60;
    const std::vector<uint8_t> in = Images(n, 3);
    const std::vector<uint8_t> out =
        RunOp<uint8_t>("auto_augment", absl::StrCat(R"({"policy": ")", policy, "\"}"), kRgb, in, n);
    const Match m =
        MatchCandidates(out, in, n, 3, {{"policy", "auto_augment"}, {"auto_policy", policy}}, kH * kW * 3 / 100);
    std::set<std::string> draws(m.names.begin(), m.names.end());
    EXPECT_GE(draws.size(), 20u);
  }
}

TEST_F(AutoAugmentTest, DrawsDependOnSeedAndSampleNotOnTheBatch) {
  const int64_t n = 16;
  const std::vector<uint8_t> in = Images(n, 3);
  const char* attrs = R"({"num_ops": 3})";
  const std::vector<uint8_t> a = RunOp<uint8_t>("rand_augment", attrs, kRgb, in, n);
  EXPECT_EQ(a, RunOp<uint8_t>("rand_augment", attrs, kRgb, in, n));
  EXPECT_NE(a, RunOp<uint8_t>("rand_augment", attrs, kRgb, in, n, /*seed=*/2));
  // The second half alone, as samples 8..15: the same bytes as in the batch.
  const int64_t half = n / 2 * kH * kW * 3;
  const std::vector<uint8_t> tail(in.begin() + half, in.end());
  const std::vector<uint8_t> alone = RunOp<uint8_t>("rand_augment", attrs, kRgb, tail, n / 2, 1, n / 2);
  EXPECT_TRUE(std::equal(alone.begin(), alone.end(), a.begin() + half));
}

TEST_F(AutoAugmentTest, BadAttrsNameTheAttr) {
  EXPECT_THAT(Infer("rand_augment", R"({"num_ops": 1000000000})", kRgb).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("attr 'num_ops' must be in [0, 100]")));
  EXPECT_THAT(Infer("rand_augment", R"({"magnitude": 31})", kRgb).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("magnitude")));
  EXPECT_THAT(Infer("trivial_augment_wide", R"({"num_magnitude_bins": 1})", kRgb).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("num_magnitude_bins")));
  EXPECT_THAT(Infer("rand_augment", R"({"fill": [1, 2]})", kRgb).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("fill")));
  EXPECT_THAT(Infer("rand_augment", R"({"fill": [300]})", kRgb).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("[0, 255]")));
  EXPECT_THAT(Infer("rand_augment", R"({"interpolation": "bilinear", "fill": [1, 2, 3]})", kRgb).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("one fill level")));
  EXPECT_THAT(Infer("auto_augment", R"({"policy": "coco"})", kRgb).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("policy")));
  EXPECT_THAT(Infer("rand_augment", "{}", ColumnSpec{"image", DType::kFloat32, Shape{kH, kW, 3}}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("uint8")));
  EXPECT_THAT(Infer("auto_augment", "{}", ColumnSpec{"image", DType::kUInt8, Shape{kH, kW, 4}}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("RGB or one-channel")));
}

}  // namespace
}  // namespace sluice::ops
