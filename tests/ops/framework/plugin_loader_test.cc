// Op plugins loaded into a process: the example plugin (examples/plugin_op,
// built against the installed package) runs like a built-in, and bad
// plugins are refused naming the file and the reason. Links the shared
// libsluice, as a plugin does: one process, one copy of the registry.
#include <cstdlib>
#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sluice/ops/plugin.h"
#include "sluice/pipeline.h"
#include "status_matchers.h"

namespace sluice::ops {
namespace {

using ::sluice::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

// A test plugin of tests/ops/plugins/.
std::string TestPlugin(const std::string& name) {
  return Env("SLUICE_TEST_PLUGINS") + "/libtest_plugin_" + name + ".so";
}

constexpr int kRows = 24, kH = 12, kW = 10, kC = 3;

PipelineBuilder Images(int threads) {
  std::vector<uint8_t> pixels(kRows * kH * kW * kC, 200);
  std::vector<int64_t> labels(kRows);
  for (int r = 0; r < kRows; ++r) labels[r] = r;
  return PipelineBuilder::Arrays({MakeArrayColumn("image", {kH, kW, kC}, pixels), MakeArrayColumn("label", {}, labels)})
      .Seed(5)
      .Threads(threads);
}

// The one batch of `builder`'s pipeline, image column as bytes.
absl::StatusOr<std::string> RunPipeline(const PipelineBuilder& builder) {
  absl::StatusOr<Pipeline> pipeline = Pipeline::FromBuilder(builder);
  if (!pipeline.ok()) return pipeline.status();
  Iterator it = pipeline->Iterate();
  std::string out;
  while (true) {
    Batch b;
    bool end = false;
    if (absl::Status s = it.Next(&b, &end); !s.ok()) return s;
    if (end) return out;
    out.append(reinterpret_cast<const char*>(b.columns[0].values.raw_data()), b.columns[0].values.byte_size());
  }
}

// Every sample of `out`: one patch of at most 4 x 6 pixels set to 7, the rest
// kept; the patches hang over the border at random places.
void ExpectOneCutoutPerSample(const std::string& out) {
  const size_t sample = kH * kW * kC;
  ASSERT_EQ(out.size(), kRows * sample);
  std::set<size_t> patch_sizes;
  for (int r = 0; r < kRows; ++r) {
    size_t patched = 0;
    for (size_t i = 0; i < sample; ++i) {
      const uint8_t v = static_cast<uint8_t>(out[r * sample + i]);
      ASSERT_TRUE(v == 7 || v == 200) << "sample " << r << " value " << int(v);
      patched += v == 7;
    }
    EXPECT_GT(patched, 0u) << "sample " << r;
    EXPECT_LE(patched, 4u * 6u * kC) << "sample " << r;
    EXPECT_EQ(patched % kC, 0u) << "whole pixels";
    patch_sizes.insert(patched);
  }
  EXPECT_GT(patch_sizes.size(), 1u);
}

PipelineBuilder WithCutout(int threads) {
  PipelineBuilder b = Images(threads);
  b.Map({Op("random_cutout", {{"size", {4, 6}}, {"value", 7.0}})});
  return b;
}

TEST(PluginLoader, TheExamplePluginsOpRunsInAPipelineLikeABuiltIn) {
  const std::string plugin = Env("SLUICE_EXAMPLE_PLUGIN");
  ASSERT_FALSE(plugin.empty()) << "SLUICE_EXAMPLE_PLUGIN is set by ctest (the InstalledPackage fixture builds it)";
  SLUICE_ASSERT_OK(LoadPlugin(plugin));
  SLUICE_ASSERT_OK(LoadPlugin(plugin));  // again: a no-op
  const OpSchema* cutout = OpRegistry::Global().Find("random_cutout");
  ASSERT_NE(cutout, nullptr);
  EXPECT_TRUE(cutout->random());
  EXPECT_THAT(OpRegistry::Global().Registrant("random_cutout"), HasSubstr("libsluice_cutout.so"));

  ASSERT_OK_AND_ASSIGN(std::string one, RunPipeline(WithCutout(1).Batch(kRows)));
  ASSERT_OK_AND_ASSIGN(std::string two, RunPipeline(WithCutout(2).Batch(kRows)));
  EXPECT_EQ(one, two) << "a seed gives the same patches whatever the thread count";
  ExpectOneCutoutPerSample(one);
  EXPECT_THAT(RunPipeline(Images(1).Map({Op("random_cutout", {{"size", {40}}})})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("op 'random_cutout': attr 'size' is larger than the image [12,10,3]")));
}

// The embedded cluster's workers are sluice processes of their own: they load
// the plugins this process loaded, so the op runs before `distribute` too.
TEST(PluginLoader, APluginsOpRunsOnTheEmbeddedClustersWorkers) {
  const std::string plugin = Env("SLUICE_EXAMPLE_PLUGIN");
  ASSERT_FALSE(plugin.empty()) << "SLUICE_EXAMPLE_PLUGIN is set by ctest (the InstalledPackage fixture builds it)";
  ASSERT_EQ(::setenv("SLUICE_BINARY", Env("SLUICE_BIN").c_str(), 1), 0) << "the command the workers run";
  SLUICE_ASSERT_OK(LoadPlugin(plugin));
  DistributeOptions distribute;
  distribute.local_workers = 1;
  ASSERT_OK_AND_ASSIGN(std::string out, RunPipeline(WithCutout(2).Distribute(distribute).Batch(kRows)));
  ExpectOneCutoutPerSample(out);
}

TEST(PluginLoader, AKernelsErrorReachesTheUserNamingTheOpItsPluginAndTheSample) {
  SLUICE_ASSERT_OK(LoadPlugin(TestPlugin("failing")));
  EXPECT_THAT(RunPipeline(Images(2).Map({Op("fail_at_label", {{"label", 13}})}).Batch(8)),
              StatusIs(absl::StatusCode::kDataLoss,
                       AllOf(HasSubstr("op 'fail_at_label' (plugin /"),
                             HasSubstr("libtest_plugin_failing.so): label 13 is poison in record 13 of <arrays>"))));
}

// A C++ exception from a plugin's code is an error naming the op and the
// sample, or the file, never std::terminate from an engine thread.
TEST(PluginLoader, AnExceptionAKernelThrowsReachesTheUserNamingTheOp) {
  SLUICE_ASSERT_OK(LoadPlugin(TestPlugin("throwing")));
  EXPECT_THAT(RunPipeline(Images(2).Map({Op("throw_at_label", {{"label", 13}})}).Batch(8)),
              StatusIs(absl::StatusCode::kInternal,
                       AllOf(HasSubstr("libtest_plugin_throwing.so"),
                             HasSubstr("record 13 of <arrays>: its kernel threw a C++ exception: label 13 has no "
                                       "class"))));
  EXPECT_THAT(LoadPlugin(TestPlugin("throwing_registration")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("libtest_plugin_throwing_registration.so"),
                             HasSubstr("its registration function threw a C++ exception: no licence file found"))));
}

TEST(PluginLoader, APluginWhoseRegistrationFailsLeavesNoneOfItsOps) {
  EXPECT_THAT(LoadPlugin(TestPlugin("half_registered")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("libtest_plugin_half_registered.so"), HasSubstr("op 'rescale' is registered"))));
  EXPECT_EQ(OpRegistry::Global().Find("half_registered_op"), nullptr);
  EXPECT_THAT(OpRegistry::Global().Backends("half_registered_op"), ::testing::IsEmpty());
  EXPECT_EQ(OpRegistry::Global().Registrant("rescale"), kBuiltinRegistrant);
  EXPECT_THAT(RunPipeline(Images(1).Map({Op("half_registered_op", {})})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown op 'half_registered_op'")));
}

TEST(PluginLoader, APluginBuiltForAnotherSluiceIsRefusedNamingTheFile) {
  const std::string path = TestPlugin("wrong_abi");
  EXPECT_THAT(LoadPlugin(path),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("libtest_plugin_wrong_abi.so: was built for another sluice (sluice-abi=0 "
                                 "sluice=0.0.1")));
  EXPECT_THAT(LoadPlugin(path), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rebuild it against")));
}

TEST(PluginLoader, AMissingSymbolIsRefusedNamingTheFileAndTheSymbol) {
  EXPECT_THAT(
      LoadPlugin(TestPlugin("missing_symbol")),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("libtest_plugin_missing_symbol.so: cannot be loaded: ")));
  EXPECT_THAT(
      LoadPlugin(TestPlugin("missing_symbol")),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("undefined symbol: sluice_test_no_such_function")));
}

TEST(PluginLoader, ASharedObjectWithoutEntryPointsIsNotAPlugin) {
  EXPECT_THAT(LoadPlugin(TestPlugin("not_a_plugin")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("libtest_plugin_not_a_plugin.so: is not a sluice plugin")));
  EXPECT_THAT(LoadPlugin("/no/such/plugin.so"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("plugin /no/such/plugin.so: no such file")));
}

TEST(PluginLoader, AnOpNameAlreadyTakenNamesBothRegistrants) {
  EXPECT_THAT(LoadPlugin(TestPlugin("duplicate")),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("op 'rescale' is registered twice: by sluice's built-in ops and by ")));
  const OpSchema* rescale = OpRegistry::Global().Find("rescale");
  ASSERT_NE(rescale, nullptr);
  EXPECT_EQ(OpRegistry::Global().Registrant("rescale"), kBuiltinRegistrant) << "the built-in stays";
}

}  // namespace
}  // namespace sluice::ops
