#include "sluice/core/tensor.h"

#include <algorithm>
#include <cassert>

#include "absl/strings/str_cat.h"

namespace sluice {

Tensor Tensor::Allocate(DType dtype, Shape shape, BufferPool* pool) {
  const size_t bytes = shape.num_elements() * DTypeSize(dtype);
  return Tensor(dtype, std::move(shape), pool->Allocate(bytes));
}

Tensor Tensor::Slice(int64_t begin, int64_t end) const {
  assert(shape_.rank() >= 1 && 0 <= begin && begin <= end && end <= shape_.dim(0));
  const size_t row_bytes = shape_.rank() == 0 ? 0 : byte_size() / std::max<int64_t>(shape_.dim(0), 1);
  absl::InlinedVector<int64_t, 4> dims(shape_.dims().begin(), shape_.dims().end());
  dims[0] = end - begin;
  return Tensor(dtype_, Shape(dims), buffer_, offset_ + begin * row_bytes);
}

Tensor Tensor::Reshaped(Shape shape) const {
  assert(shape.num_elements() == num_elements());
  return Tensor(dtype_, std::move(shape), buffer_, offset_);
}

std::string Tensor::DebugString() const { return absl::StrCat(DTypeName(dtype_), shape_.ToString()); }

}  // namespace sluice
