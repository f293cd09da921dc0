// Element types of tensors.
#ifndef SLUICE_CORE_DTYPE_H_
#define SLUICE_CORE_DTYPE_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sluice {

// float16 (IEEE half) only as an output, for tensors bound for a GPU.
enum class DType : uint8_t { kUInt8, kInt32, kInt64, kFloat32, kFloat16 };

// Bytes per element.
size_t DTypeSize(DType dtype);
// "uint8", "int32", "int64", "float32", "float16".
absl::string_view DTypeName(DType dtype);
// Inverse of DTypeName; InvalidArgument naming the accepted names otherwise.
absl::StatusOr<DType> ParseDType(absl::string_view name);

template <typename T>
struct DTypeOf;
template <>
struct DTypeOf<uint8_t> {
  static constexpr DType value = DType::kUInt8;
};
template <>
struct DTypeOf<int32_t> {
  static constexpr DType value = DType::kInt32;
};
template <>
struct DTypeOf<int64_t> {
  static constexpr DType value = DType::kInt64;
};
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::kFloat32;
};

}  // namespace sluice

#endif  // SLUICE_CORE_DTYPE_H_
