// Tensor shapes: a short list of non-negative dimensions.
#ifndef SLUICE_CORE_SHAPE_H_
#define SLUICE_CORE_SHAPE_H_

#include <cstdint>
#include <initializer_list>
#include <string>

#include "absl/container/inlined_vector.h"
#include "absl/types/span.h"

namespace sluice {

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(absl::Span<const int64_t> dims) : dims_(dims.begin(), dims.end()) {}

  int rank() const { return static_cast<int>(dims_.size()); }
  int64_t dim(int i) const { return dims_[i]; }
  absl::Span<const int64_t> dims() const { return dims_; }
  int64_t num_elements() const;

  // This shape with `n` prepended (a batch of n of these).
  Shape WithLeading(int64_t n) const;
  // This shape without its first dimension. REQUIRES: rank() >= 1.
  Shape WithoutLeading() const;

  // "[32,32,3]"; a scalar is "[]".
  std::string ToString() const;

  bool operator==(const Shape& other) const { return dims_ == other.dims_; }
  bool operator!=(const Shape& other) const { return !(*this == other); }

 private:
  absl::InlinedVector<int64_t, 4> dims_;
};

// An image sample: [H, W] (one channel) or [H, W, C], row-major.
struct ImageDims {
  int64_t h, w, c;
  int64_t row_elems() const { return w * c; }
  int64_t elems() const { return h * w * c; }
};

}  // namespace sluice

#endif  // SLUICE_CORE_SHAPE_H_
