#include "sluice/ops/kernel.h"

#include "absl/strings/str_cat.h"

namespace sluice::ops {

absl::string_view BackendName(Backend backend) { return backend == Backend::kCuda ? "cuda" : "cpu"; }

absl::StatusOr<Backend> ParseBackend(absl::string_view name) {
  if (name.empty() || name == "cpu") return Backend::kCpu;
  if (name == "cuda") return Backend::kCuda;
  return absl::InvalidArgumentError(absl::StrCat("device must be \"cpu\" or \"cuda\", got \"", name, "\""));
}

SampleRng KernelContext::RngFor(uint64_t key, int64_t r) const {
  const int64_t id = provenance == nullptr ? -1 : provenance->SampleId(provenance_row + r);
  // Rows of unknown origin (kernels run on bare tensors) key on position.
  return SampleRng(seed, key, epoch, static_cast<uint64_t>(id >= 0 ? id : first_sample + r));
}

std::string KernelContext::Where(int64_t r) const {
  if (provenance == nullptr) return absl::StrCat("row ", first_sample + r);
  return provenance->Describe(provenance_row + r);
}

}  // namespace sluice::ops
