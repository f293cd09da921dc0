// Object stores in a build without Arrow's C++ libraries.
#include "absl/strings/str_cat.h"
#include "sluice/io/object_store.h"

namespace sluice::io {
namespace {

absl::Status NotInThisBuild(const std::string& url) {
  return absl::UnimplementedError(absl::StrCat("cannot read ", url,
                                               ": this build of sluice reads no object stores (it was built "
                                               "without pyarrow's Arrow C++ libraries)"));
}

}  // namespace

absl::Duration ObjectStoreTimeout() { return absl::ZeroDuration(); }

int64_t ObjectStoreRetries() { return 0; }

int64_t ObjectBlockBytes() { return 0; }

int64_t ObjectBlockPeakBytes() { return 0; }

absl::StatusOr<std::unique_ptr<RandomAccessFile>> OpenObject(const std::string& url) { return NotInThisBuild(url); }

std::shared_ptr<const void> OpenObjectAhead(const std::string&) { return nullptr; }

int64_t ObjectsOpenedAhead() { return 0; }

absl::StatusOr<std::vector<std::string>> ListObjects(const std::string& pattern) { return NotInThisBuild(pattern); }

absl::StatusOr<std::vector<std::string>> ListObjectsUnder(const std::string& prefix_url) {
  return NotInThisBuild(prefix_url);
}

}  // namespace sluice::io
