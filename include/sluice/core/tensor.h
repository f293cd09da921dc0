// A typed, shaped view of a reference-counted buffer.
#ifndef SLUICE_CORE_TENSOR_H_
#define SLUICE_CORE_TENSOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "sluice/core/buffer_pool.h"
#include "sluice/core/dtype.h"
#include "sluice/core/shape.h"

namespace sluice {

// Contiguous, row-major. Copying a Tensor copies the view, not the data;
// the buffer lives while any view does. Not thread-safe for writes: a tensor
// being filled belongs to one thread (or to disjoint row ranges of several).
class Tensor {
 public:
  Tensor() = default;
  Tensor(DType dtype, Shape shape, std::shared_ptr<Buffer> buffer, size_t offset = 0)
      : dtype_(dtype), shape_(std::move(shape)), buffer_(std::move(buffer)), offset_(offset) {}

  // A tensor with uninitialized contents drawn from `pool`.
  static Tensor Allocate(DType dtype, Shape shape, BufferPool* pool = BufferPool::Default());

  bool valid() const { return buffer_ != nullptr; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t num_elements() const { return shape_.num_elements(); }
  size_t byte_size() const { return num_elements() * DTypeSize(dtype_); }
  const std::shared_ptr<Buffer>& buffer() const { return buffer_; }
  // Where the bytes are; raw_data() of a kDevice tensor is a device pointer.
  MemoryKind memory_kind() const { return buffer_ ? buffer_->memory_kind() : MemoryKind::kHost; }

  uint8_t* raw_data() const { return buffer_->data() + offset_; }
  template <typename T>
  T* data() const {
    return reinterpret_cast<T*>(raw_data());
  }

  // Rows [begin, end) along dimension 0, sharing the buffer.
  // REQUIRES: rank() >= 1 and 0 <= begin <= end <= dim(0).
  Tensor Slice(int64_t begin, int64_t end) const;
  // The same bytes under another shape. REQUIRES: same element count.
  Tensor Reshaped(Shape shape) const;

  // "uint8[32,32,3]".
  std::string DebugString() const;

 private:
  DType dtype_ = DType::kUInt8;
  Shape shape_;
  std::shared_ptr<Buffer> buffer_;
  size_t offset_ = 0;
};

}  // namespace sluice

#endif  // SLUICE_CORE_TENSOR_H_
