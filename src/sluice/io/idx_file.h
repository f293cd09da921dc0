// MNIST's IDX format: magic (0, 0, type 0x08 = uint8, rank), rank big-endian
// uint32 dimensions, then the data row-major.
#ifndef SLUICE_IO_IDX_FILE_H_
#define SLUICE_IO_IDX_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sluice/io/random_access_file.h"

namespace sluice::io {

// The largest row (one image, one label) a header may declare: 1 GiB.
inline constexpr uint64_t kMaxIdxRowBytes = uint64_t{1} << 30;

struct IdxHeader {
  std::vector<int64_t> dims;
  uint64_t data_offset = 0;
};

// Reads and checks the header of a uint8 IDX file of rank `expected_rank`:
// InvalidArgument for a wrong magic or rank, DataLoss when the file size
// does not match the dimensions, an inner dimension is 0 or a row would hold
// more than kMaxIdxRowBytes.
absl::StatusOr<IdxHeader> ReadIdxHeader(const RandomAccessFile& file, int expected_rank);

// The header of a uint8 IDX file of `dims` (each below 2^32), the data
// following it.
std::string IdxHeaderBytes(const std::vector<int64_t>& dims);
// Writes a uint8 IDX file.
absl::Status WriteIdxFile(const std::string& path, const std::vector<int64_t>& dims, const uint8_t* data);

}  // namespace sluice::io

#endif  // SLUICE_IO_IDX_FILE_H_
