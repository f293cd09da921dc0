// The kernel-level harness of op tests: one registered op inferred and its
// cpu kernel run on in-memory samples, with no pipeline or executor.
#ifndef SLUICE_TESTS_TESTING_OP_HARNESS_H_
#define SLUICE_TESTS_TESTING_OP_HARNESS_H_

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "pipeline.pb.h"
#include "sluice/ops/op_registry.h"
#include "sluice/pipeline_builder.h"
#include "temp_dir.h"

namespace sluice::ops::testing {

// torchvision's answer (tests/ops/torchvision_reference.py under Debian's
// /usr/bin/python3) for `image`, the bytes of an array of `shape` (HWC, or
// NHWC for the level ops) and `dtype`, with the op and attrs in `spec`.
// Files go to `dir`.
inline std::string TorchvisionReference(const std::string& dir, const std::string& image, std::vector<int64_t> shape,
                                        const std::string& dtype, nlohmann::json spec) {
  const std::string in = dir + "/reference_in.raw", out = dir + "/reference_out.raw";
  sluice::testing::WriteFileBytes(in, image);
  spec["shape"] = shape;
  spec["dtype"] = dtype;
  const std::string cmd = std::string("/usr/bin/python3 ") + std::getenv("SLUICE_SOURCE_DIR") +
                          "/tests/ops/torchvision_reference.py " + in + " " + out + " '" + spec.dump() + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return sluice::testing::ReadFileBytes(out);
}

inline google::protobuf::Struct Attrs(const std::string& json) {
  google::protobuf::Struct s;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &s).ok()) << json;
  return s;
}

inline absl::StatusOr<InferredOp> Infer(const std::string& op, const std::string& attrs, const ColumnSpec& spec) {
  return OpRegistry::Global().Infer(op, Attrs(attrs), Schema({spec}));
}

// Op `op`'s cpu kernel for `inferred`, set up.
inline std::unique_ptr<Kernel> CpuKernel(const std::string& op, const InferredOp& inferred) {
  absl::StatusOr<std::unique_ptr<Kernel>> kernel = OpRegistry::Global().MakeKernel(op, Backend::kCpu, inferred);
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  if (!kernel.ok()) return nullptr;
  EXPECT_TRUE((*kernel)->Setup(SetupContext{}).ok());
  return *std::move(kernel);
}

// How a kernel runs outside the executor: the draws' keys and the cache hint.
struct RunOptions {
  uint64_t seed = 1;
  int64_t first_sample = 0;
  uint64_t op_key = 42;
  bool bypass_cache = false;
};

// The kernel-level harness: op `name` with `attrs` (JSON) inferred on one
// column `spec` and its cpu kernel run, with no pipeline, on `rows` rows at
// `in` (row-major, spec's row size each); the output column's rows into
// `out`, resized to fit. Errors are the op's own (inference, kernel).
inline absl::StatusOr<ColumnSpec> RunKernel(const std::string& name, const google::protobuf::Struct& attrs,
                                            const ColumnSpec& spec, const uint8_t* in, int64_t rows,
                                            std::vector<uint8_t>* out, const RunOptions& options = {}) {
  absl::StatusOr<InferredOp> inferred = OpRegistry::Global().Infer(name, attrs, Schema({spec}));
  if (!inferred.ok()) return inferred.status();
  absl::StatusOr<std::unique_ptr<Kernel>> kernel = OpRegistry::Global().MakeKernel(name, Backend::kCpu, *inferred);
  if (!kernel.ok()) return kernel.status();
  if (absl::Status s = (*kernel)->Setup(SetupContext{}); !s.ok()) return s;
  const ColumnSpec& out_spec = inferred->outputs[0];
  const int64_t out_row_bytes = out_spec.shape.num_elements() * DTypeSize(out_spec.dtype);
  out->resize(static_cast<size_t>(out_row_bytes * rows));
  const ColumnRef src{const_cast<uint8_t*>(in),
                      spec.shape.num_elements() * static_cast<int64_t>(DTypeSize(spec.dtype))};
  const ColumnRef dst{out->data(), out_row_bytes};
  KernelContext ctx;
  ctx.rows = rows;
  ctx.seed = options.seed;
  ctx.first_sample = options.first_sample;
  ctx.op_key = options.op_key;
  ctx.bypass_cache = options.bypass_cache;
  if (absl::Status s = (*kernel)->Run(ctx, {src}, {dst}); !s.ok()) return s;
  return out_spec;
}

// The same with the attrs as the C++ builder writes them.
inline absl::StatusOr<Tensor> RunKernel(const OpSpec& op, const ColumnSpec& spec, const Tensor& in,
                                        const RunOptions& options = {}) {
  const PipelineDef def = PipelineBuilder::Arrays({}).Map({op}).Build();
  std::vector<uint8_t> bytes;
  const int64_t rows = in.shape().dim(0);
  absl::StatusOr<ColumnSpec> out =
      RunKernel(op.op, def.nodes(1).map().ops(0).attrs(), spec, in.raw_data(), rows, &bytes, options);
  if (!out.ok()) return out.status();
  Tensor t = Tensor::Allocate(out->dtype, out->shape.WithLeading(rows));
  std::memcpy(t.raw_data(), bytes.data(), bytes.size());
  return t;
}

// RunKernel on `rows` samples of `spec` in `in`, its output as Out; a
// failure fails the test.
template <typename Out, typename In>
std::vector<Out> RunOp(const std::string& name, const std::string& attrs, const ColumnSpec& spec,
                       const std::vector<In>& in, int64_t rows, uint64_t seed = 1, int64_t first_sample = 0,
                       uint64_t op_key = 42, bool bypass_cache = false) {
  std::vector<uint8_t> bytes;
  const absl::StatusOr<ColumnSpec> out =
      RunKernel(name, Attrs(attrs), spec, reinterpret_cast<const uint8_t*>(in.data()), rows, &bytes,
                {seed, first_sample, op_key, bypass_cache});
  EXPECT_TRUE(out.ok()) << name << ": " << out.status();
  std::vector<Out> values(bytes.size() / sizeof(Out));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(Out));
  return values;
}

// Deterministic pseudo-random values in [0, 256).
template <typename T>
std::vector<T> Pattern(size_t n, uint64_t seed) {
  std::vector<T> v(n);
  uint64_t x = seed;
  for (size_t i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    v[i] = static_cast<T>((x >> 33) % 256);
  }
  return v;
}

}  // namespace sluice::ops::testing

#endif  // SLUICE_TESTS_TESTING_OP_HARNESS_H_
