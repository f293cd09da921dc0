#include "sluice/profile/trace_writer.h"

#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "sluice/pipeline_builder.h"
#include "temp_dir.h"
#include "test_data.h"

namespace sluice::profile {
namespace {

TEST(TraceWriter, TheTraceParsesAndHasTracksSpansAndCounters) {
  testing::TempDir dir;
  testing::WriteCifarTfRecords(dir.path(), 64, 2);
  PipelineDef def =
      PipelineBuilder::TfRecord({dir.Join("*.tfrecord")}, {BytesFeature("image", 3072), Int64Feature("label")})
          .Map({Op("reshape", {{"shape", {32, 32, 3}}}), Op("gaussian_blur", {{"ksize", 5}, {"sigma", 1.0}})})
          .Batch(8)
          .Prefetch()
          .Build();
  ProfileOptions options;
  options.seconds = 0.5;
  options.short_seconds = 0.2;
  options.ablation = false;
  options.trace = true;
  absl::StatusOr<ProfileResult> r = RunProfile(def, options, [](const std::string&) {});
  ASSERT_TRUE(r.ok()) << r.status();

  const nlohmann::json trace = nlohmann::json::parse(ChromeTraceJson(*r));  // throws if malformed
  std::set<std::string> threads, ops, categories, counters;
  for (const nlohmann::json& e : trace.at("traceEvents")) {
    const std::string ph = e.at("ph");
    if (ph == "M" && e.at("name") == "thread_name") threads.insert(e.at("args").at("name").get<std::string>());
    if (ph == "X") {
      categories.insert(e.at("cat").get<std::string>());
      if (e.at("cat") == "op") ops.insert(e.at("name").get<std::string>());
      EXPECT_GE(e.at("dur").get<double>(), 0);
    }
    if (ph == "C") counters.insert(e.at("name").get<std::string>());
  }
  EXPECT_THAT(threads, ::testing::IsSupersetOf({"map_1/0", "prefetch_3"}));  // a track per node thread
  EXPECT_THAT(categories, ::testing::IsSupersetOf({"op", "node", "consumer"}));
  EXPECT_THAT(ops, ::testing::IsSupersetOf({"parse_example", "gaussian_blur"}));
  EXPECT_THAT(counters, ::testing::IsSupersetOf({"samples/s", "consumer wait", "prefetch_3 buffered"}));
}

}  // namespace
}  // namespace sluice::profile
