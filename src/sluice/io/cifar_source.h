// CIFAR-10 binary batches (data_batch_N.bin) as a source. Each record is
// 1 label byte then 3,072 pixel bytes, planar (1,024 R, G, B, row-major
// 32x32). Yields "image" uint8 [32,32,3] in HWC order and "label" int64 [].
#ifndef SLUICE_IO_CIFAR_SOURCE_H_
#define SLUICE_IO_CIFAR_SOURCE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sluice/io/source_format.h"

namespace sluice::io {

inline constexpr int64_t kCifarRecordBytes = 3073;

// DataLoss naming the file when its size is not a whole number of records.
absl::StatusOr<std::unique_ptr<SourceFormat>> MakeCifar10Source(const std::vector<std::string>& patterns,
                                                                int64_t split_records = 0);

}  // namespace sluice::io

#endif  // SLUICE_IO_CIFAR_SOURCE_H_
