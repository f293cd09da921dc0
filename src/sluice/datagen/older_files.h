// A make-data run into a folder that an earlier one filled with more or
// other files would leave those beside its own, and every reader of the
// folder (a glob, an image folder) would mix the two datasets. The run is
// refused before it writes anything; nothing is deleted.
#ifndef SLUICE_DATAGEN_OLDER_FILES_H_
#define SLUICE_DATAGEN_OLDER_FILES_H_

#include <functional>
#include <string>

#include "absl/status/status.h"

namespace sluice::datagen {

// FailedPrecondition naming how many files under `dir` (to two folders
// deep, as paths relative to it with '/') are named as `ours` says a
// make-data file is, yet not as `written` says this run will write.
absl::Status RefuseOlderFiles(const std::string& dir, const std::function<bool(const std::string&)>& ours,
                              const std::function<bool(const std::string&)>& written);

}  // namespace sluice::datagen

#endif  // SLUICE_DATAGEN_OLDER_FILES_H_
