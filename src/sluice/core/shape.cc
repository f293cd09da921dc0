#include "sluice/core/shape.h"

#include "absl/strings/str_join.h"

namespace sluice {

int64_t Shape::num_elements() const {
  int64_t n = 1;
  for (int64_t d : dims_) n *= d;
  return n;
}

Shape Shape::WithLeading(int64_t n) const {
  Shape out;
  out.dims_.reserve(dims_.size() + 1);
  out.dims_.push_back(n);
  out.dims_.insert(out.dims_.end(), dims_.begin(), dims_.end());
  return out;
}

Shape Shape::WithoutLeading() const { return Shape(absl::MakeConstSpan(dims_).subspan(1)); }

std::string Shape::ToString() const { return "[" + absl::StrJoin(dims_, ",") + "]"; }

}  // namespace sluice
