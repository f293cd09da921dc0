// Runs one registered op on in-memory samples, for op tests.
#ifndef SLUICE_TESTS_TESTING_OP_HARNESS_H_
#define SLUICE_TESTS_TESTING_OP_HARNESS_H_

#include <cstdlib>
#include <string>
#include <vector>

#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "sluice/ops/op_registry.h"
#include "temp_dir.h"

namespace sluice::ops::testing {

// torchvision's answer (tests/ops/torchvision_reference.py under Debian's
// /usr/bin/python3) for `image`, the bytes of an array of `shape` (HWC, or
// NHWC for the level ops) and `dtype`, with the op and attrs in `spec`.
// Files go to `dir`.
inline std::string TorchvisionReference(const std::string& dir, const std::string& image,
                                        std::vector<int64_t> shape, const std::string& dtype, nlohmann::json spec) {
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

// Runs op `name` on `rows` samples of `spec` in `in` (sample index of row 0:
// `first_sample`; KernelContext::bypass_cache as given); returns the output
// as Out.
template <typename Out, typename In>
std::vector<Out> RunOp(const std::string& name, const std::string& attrs, const ColumnSpec& spec,
                       const std::vector<In>& in, int64_t rows, uint64_t seed = 1,
                       int64_t first_sample = 0, uint64_t op_key = 42, bool bypass_cache = false) {
  auto inferred = Infer(name, attrs, spec);
  EXPECT_TRUE(inferred.ok()) << inferred.status();
  if (!inferred.ok()) return {};
  std::unique_ptr<Kernel> kernel = CpuKernel(name, *inferred);
  if (kernel == nullptr) return {};
  const ColumnSpec& out_spec = inferred->outputs[0];
  const int64_t out_row_bytes = out_spec.shape.num_elements() * DTypeSize(out_spec.dtype);
  std::vector<Out> out(out_row_bytes * rows / sizeof(Out));
  ColumnRef src{reinterpret_cast<uint8_t*>(const_cast<In*>(in.data())),
                static_cast<int64_t>(spec.shape.num_elements() * sizeof(In))};
  ColumnRef dst{reinterpret_cast<uint8_t*>(out.data()), out_row_bytes};
  KernelContext ctx;
  ctx.rows = rows;
  ctx.seed = seed;
  ctx.first_sample = first_sample;
  ctx.op_key = op_key;
  ctx.bypass_cache = bypass_cache;
  const absl::Status s = kernel->Run(ctx, {src}, {dst});
  EXPECT_TRUE(s.ok()) << s;
  return out;
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
