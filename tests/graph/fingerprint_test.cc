// A definition's fingerprint changes with anything in it; its output
// fingerprint only with what changes the output.
#include "sluice/graph/fingerprint.h"

#include "gtest/gtest.h"
#include "sluice/pipeline_builder.h"

namespace sluice::graph {
namespace {

PipelineBuilder Base(int prefetch = 2) {
  return PipelineBuilder::Arrays({MakeArrayColumn("x", {4}, std::vector<float>(40, 1.f))})
      .Map({Op("rescale", {{"scale", 2.0}})})
      .Batch(5)
      .Prefetch(prefetch)
      .Seed(3);
}

TEST(Fingerprint, TheSameDefinitionGivesTheSame32HexDigits) {
  const std::string f = Fingerprint(Base().Build());
  EXPECT_EQ(f.size(), 32u);
  EXPECT_EQ(f.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(f, Fingerprint(Base().Build()));
  EXPECT_NE(f, Fingerprint(Base().Threads(4).Build()));
}

TEST(OutputFingerprint, IgnoresWhatOnlyShapesTheRun) {
  const std::string f = OutputFingerprint(Base().Build());
  EXPECT_EQ(f, OutputFingerprint(Base(/*prefetch=*/3).Threads(4).Name("other").Build()));
  EXPECT_EQ(f, OutputFingerprint(Base().Unordered().Build()));
  // A state moves between the placements "auto" chooses.
  EXPECT_EQ(f, OutputFingerprint(Base().Placement("auto").Build()));
  EXPECT_EQ(Base().Placement("auto").Build().options().placement(), "auto");
}

TEST(OutputFingerprint, ChangesWithWhatChangesTheOutput) {
  const std::string f = OutputFingerprint(Base().Build());
  EXPECT_NE(f, OutputFingerprint(Base().Seed(4).Build()));
  EXPECT_NE(f, OutputFingerprint(PipelineBuilder::Arrays({MakeArrayColumn("x", {4}, std::vector<float>(40, 1.f))})
                                     .Map({Op("rescale", {{"scale", 3.0}})})
                                     .Batch(5)
                                     .Prefetch(2)
                                     .Seed(3)
                                     .Build()));
  PipelineDef renamed = Base().Build();
  renamed.mutable_nodes(1)->set_name("another_map");  // node names key the draws
  EXPECT_NE(f, OutputFingerprint(renamed));
}

// A python op as the Python front writes it: the callable pickled, and
// its identity (what stays the same in every process).
PipelineDef WithPythonOp(const std::string& pickled, const std::string& identity) {
  return PipelineBuilder::Arrays({MakeArrayColumn("x", {4}, std::vector<float>(40, 1.f))})
      .Map({Op("python", {{"pickled", pickled}, {"identity", identity}})})
      .Build();
}

TEST(DefinitionFingerprint, CountsPythonCodeByItsIdentityNotItsPickledBytes) {
  const std::string f = DefinitionFingerprint(WithPythonOp("bytes of process 1", "AddOne()"));
  EXPECT_EQ(f, DefinitionFingerprint(WithPythonOp("bytes of process 2", "AddOne()")));
  EXPECT_NE(f, DefinitionFingerprint(WithPythonOp("bytes of process 1", "AddTwo()")));
  EXPECT_NE(Fingerprint(WithPythonOp("bytes of process 1", "AddOne()")),
            Fingerprint(WithPythonOp("bytes of process 2", "AddOne()")));
  EXPECT_NE(DefinitionFingerprint(Base().Build()), DefinitionFingerprint(Base().Threads(4).Build()));
}

}  // namespace
}  // namespace sluice::graph
