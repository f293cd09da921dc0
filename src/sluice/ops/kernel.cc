#include "sluice/ops/kernel.h"

#include "absl/strings/str_cat.h"

namespace sluice::ops {

std::string TileContext::Where(int64_t r) const {
  if (provenance == nullptr) return absl::StrCat("row ", first_sample + r);
  return provenance->Describe(provenance_row + r);
}

}  // namespace sluice::ops
