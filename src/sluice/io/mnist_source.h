// An MNIST IDX pair as a source: "image" uint8 [rows, cols] and "label"
// int64 [].
#ifndef SLUICE_IO_MNIST_SOURCE_H_
#define SLUICE_IO_MNIST_SOURCE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "sluice/io/source_format.h"

namespace sluice::io {

// Checks both headers and that the counts agree. Records are fixed-size, so
// `split_records` > 0 splits into record ranges.
absl::StatusOr<std::unique_ptr<SourceFormat>> MakeMnistSource(const std::string& images, const std::string& labels,
                                                              int64_t split_records = 0);

}  // namespace sluice::io

#endif  // SLUICE_IO_MNIST_SOURCE_H_
