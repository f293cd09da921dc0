#include "sluice/core/dtype.h"

#include "absl/strings/str_cat.h"

namespace sluice {

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kUInt8:
      return 1;
    case DType::kFloat16:
      return 2;
    case DType::kInt32:
    case DType::kFloat32:
      return 4;
    case DType::kInt64:
      return 8;
  }
  return 0;
}

absl::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kUInt8:
      return "uint8";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kFloat32:
      return "float32";
    case DType::kFloat16:
      return "float16";
  }
  return "?";
}

absl::StatusOr<DType> ParseDType(absl::string_view name) {
  for (DType d : {DType::kUInt8, DType::kInt32, DType::kInt64, DType::kFloat32, DType::kFloat16}) {
    if (name == DTypeName(d)) return d;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dtype '", name, "' (expected uint8, int32, int64, float32 or float16)"));
}

}  // namespace sluice
