#include "sluice/profile/report_html.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::profile {
namespace {

using ::testing::HasSubstr;

TEST(ReportHtml, ShowsTheVerdictLeversChartsAndEscapesNames) {
  ProfileResult r;
  r.findings.pipeline = "w2 <test>";
  r.findings.samples_per_s = 41'000;
  OpCost blur;
  blur.node_name = "map_1";
  blur.op_name = "gaussian_blur";
  blur.cpu_share = 0.71;
  blur.core_s_per_1k = 0.035;
  r.findings.ops = {blur};
  r.verdict.summary = "input-bound: pipeline 41k samples/s, the trainer 120k";
  r.verdict.levers = {Lever{"materialize gaussian_blur", 140'000, "71% of the CPU"}};
  r.full.series = {Series{"samples/s", {{0.1, 40'000}, {0.2, 42'000}, {0.3, 41'000}}}};
  const std::string html = HtmlReport(r);
  EXPECT_THAT(html, HasSubstr("<!DOCTYPE html>"));
  EXPECT_THAT(html, HasSubstr("w2 &lt;test&gt;"));
  EXPECT_THAT(html, HasSubstr("input-bound: pipeline 41k samples/s, the trainer 120k"));
  EXPECT_THAT(html, HasSubstr("materialize gaussian_blur</td><td>140k"));
  EXPECT_THAT(html, HasSubstr("<polyline points="));  // throughput over time
  EXPECT_THAT(html, HasSubstr("71%</text>"));         // the op's bar
  EXPECT_THAT(html, ::testing::Not(HasSubstr("<script")));
}

}  // namespace
}  // namespace sluice::profile
