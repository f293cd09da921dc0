#include "sluice/ops/op_registry.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "op_harness.h"
#include "sluice/ops/geometry_params.h"
#include "status_matchers.h"

namespace sluice::ops {
namespace {

using ::sluice::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct CopyParams {
  int64_t bytes;
};

class CopyKernel : public Kernel {
 public:
  using Params = CopyParams;
  explicit CopyKernel(const Params& p) : bytes_(p.bytes) {}
  absl::Status Run(const KernelContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    std::memcpy(out[0].data, in[0].data, static_cast<size_t>(ctx.rows * bytes_));
    return absl::OkStatus();
  }

 private:
  int64_t bytes_;
};

absl::StatusOr<InferredOp> InferCopy(const Attrs& attrs, const Schema& input) {
  InferredOp op;
  op.inputs = {0};
  op.outputs = {input.column(0)};
  op.random = true;  // claims to draw; its schema says it never does
  op.SetParams(CopyParams{input.column(0).shape.num_elements()});
  return op;
}

OpSchema CopySchema(const std::string& name) {
  return OpSchema(name).Doc("copies column 0").Input("0", "any").Output("0", "the same").Infer(InferCopy);
}

TEST(OpRegistry, ANameRegisteredTwiceNamesBothRegistrants) {
  OpRegistry registry;
  SLUICE_ASSERT_OK(registry.AddOp(CopySchema("copy"), "plugin /a/first.so"));
  EXPECT_THAT(registry.AddOp(CopySchema("copy"), "plugin /b/second.so"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("op 'copy' is registered twice: by plugin /a/first.so and by plugin /b/second.so")));
  SLUICE_ASSERT_OK(registry.AddKernel<CopyKernel>("copy", Backend::kCpu, "plugin /a/first.so"));
  EXPECT_THAT(registry.AddKernel<CopyKernel>("copy", Backend::kCpu, "plugin /b/second.so"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("the cpu kernel of op 'copy' is registered twice: by plugin /a/first.so and by "
                                 "plugin /b/second.so")));
}

// A plugin's inference that gives what the graph cannot use is an error
// naming the op and its registrant, not a crash or a hang.
TEST(OpRegistry, AnInferenceGivingColumnsTheGraphCannotUseIsAnErrorNamingTheOp) {
  const Schema input({{"x", DType::kUInt8, Shape{4}}});
  const auto infer_with = [&](std::function<void(InferredOp*)> spoil) {
    OpRegistry registry;
    EXPECT_TRUE(registry
                    .AddOp(OpSchema("spoilt")
                               .Doc("copies column 0, then spoils it")
                               .Input("0", "any")
                               .Output("0", "the same")
                               .Infer([spoil](const Attrs& attrs, const Schema& in) -> absl::StatusOr<InferredOp> {
                                 absl::StatusOr<InferredOp> op = InferCopy(attrs, in);
                                 spoil(&*op);
                                 return op;
                               }),
                           "plugin /p/spoilt.so")
                    .ok());
    return registry.InferWith("spoilt", Attrs::Bind({}, google::protobuf::Struct()).value(), input).status();
  };
  EXPECT_THAT(infer_with([](InferredOp* op) { op->outputs.clear(); }),
              StatusIs(absl::StatusCode::kInternal,
                       HasSubstr("op 'spoilt' (plugin /p/spoilt.so): its inference step gave no output column")));
  EXPECT_THAT(infer_with([](InferredOp* op) { op->inputs = {99}; }),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("read input column 99 of 1")));
  EXPECT_THAT(infer_with([](InferredOp* op) { op->outputs[0].shape = Shape{-5}; }),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("gave output 'x' the shape [-5]")));
  EXPECT_THAT(infer_with([](InferredOp* op) { op->outputs[0].shape = Shape{int64_t{1} << 40, 1 << 20}; }),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("gave output 'x' the shape")));
  EXPECT_THAT(infer_with([](InferredOp* op) { op->outputs[0].name.clear(); }),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("an output column without a name")));
  SLUICE_EXPECT_OK(infer_with([](InferredOp*) {}));
}

TEST(OpRegistry, ADefaultTheAttrCannotTakeIsRefusedWhenTheOpIsAdded) {
  OpRegistry registry;
  EXPECT_THAT(registry.AddOp(CopySchema("lo").Attr({"lo", AttrType::kFloat, "abc", "x"}), "plugin /p/mine.so"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("op 'lo' (plugin /p/mine.so): attr 'lo': its "
                                                                     "default abc is no JSON value it takes")));
  EXPECT_THAT(registry.AddOp(CopySchema("field").Attr({"field", AttrType::kString, "label", "x"}), "plugin /p/mine.so"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("quoted: \"\\\"image\\\"\"")));
  SLUICE_EXPECT_OK(registry.AddOp(CopySchema("quoted").Attr({"field", AttrType::kString, "\"label\"", "x"}), "p"));
}

TEST(OpRegistry, ABuiltinNameTakenByAPluginNamesBoth) {
  EXPECT_THAT(
      OpRegistry::Global().AddOp(CopySchema("rescale"), "plugin /p/mine.so"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("op 'rescale' is registered twice: by sluice's built-in ops and by plugin /p/mine.so")));
}

TEST(OpRegistry, IncompleteSchemasAndStrayKernelsAreRefused) {
  OpRegistry registry;
  EXPECT_THAT(
      registry.AddOp(OpSchema("x").Doc("d")),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("op 'x' (sluice's built-in ops) has no inference")));
  EXPECT_THAT(registry.AddOp(OpSchema("x").Infer(InferCopy)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("has no doc")));
  EXPECT_THAT(registry.AddKernel<CopyKernel>("nothing", Backend::kCpu),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("op 'nothing', which is not registered")));
}

TEST(OpRegistry, KernelsAreLookedUpPerBackend) {
  OpRegistry registry;
  SLUICE_ASSERT_OK(registry.AddOp(CopySchema("copy")));
  SLUICE_ASSERT_OK(registry.AddKernel<CopyKernel>("copy", Backend::kCpu));
  EXPECT_THAT(registry.Backends("copy"), ElementsAre(Backend::kCpu));
  EXPECT_TRUE(registry.Runs("copy", Backend::kCpu));
  EXPECT_FALSE(registry.Runs("copy", Backend::kCuda));
  ASSERT_OK_AND_ASSIGN(
      InferredOp op, registry.Infer("copy", testing::Attrs("{}"), Schema({ColumnSpec{"x", DType::kUInt8, Shape{4}}})));
  EXPECT_FALSE(op.random) << "an op whose schema never draws has no random instance";
  SLUICE_ASSERT_OK(registry.MakeKernel("copy", Backend::kCpu, op).status());
  EXPECT_THAT(registry.MakeKernel("copy", Backend::kCuda, op),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("op 'copy' has no cuda kernel (it has: cpu)")));
}

TEST(OpRegistry, AKernelGivenParamsOfAnotherTypeFailsClearly) {
  OpRegistry registry;
  SLUICE_ASSERT_OK(registry.AddOp(CopySchema("copy")));
  SLUICE_ASSERT_OK(registry.AddKernel<CopyKernel>("copy", Backend::kCpu));
  InferredOp wrong;
  wrong.SetParams(1.5);
  EXPECT_THAT(registry.MakeKernel("copy", Backend::kCpu, wrong),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("op 'copy': the kernel expects params of type")));
}

TEST(OpRegistry, InternalOpsAreNeitherListedNorWritable) {
  EXPECT_NE(OpRegistry::Global().Find(kFusedWarpOp), nullptr);
  for (const OpSchema* op : OpRegistry::Global().List()) EXPECT_FALSE(op->internal()) << op->name();
  EXPECT_THAT(OpRegistry::Global().Infer(kFusedWarpOp, testing::Attrs("{}"), Schema()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown op 'fused_warp'")));
}

TEST(OpRegistry, ViewOpsRunOnEveryBackendOfTheBuild) {
  const OpRegistry& global = OpRegistry::Global();
  EXPECT_TRUE(global.Runs("reshape", Backend::kCpu));
  EXPECT_EQ(global.Runs("reshape", Backend::kCuda), global.runtime(Backend::kCuda) != nullptr);
}

TEST(OpRegistry, EveryBuiltinOpRunsOnTheCpu) {
  for (const OpSchema* op : OpRegistry::Global().List()) {
    EXPECT_TRUE(OpRegistry::Global().Runs(op->name(), Backend::kCpu)) << op->name();
    EXPECT_EQ(OpRegistry::Global().Registrant(op->name()), kBuiltinRegistrant);
  }
}

}  // namespace
}  // namespace sluice::ops
