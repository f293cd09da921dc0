#include "sluice/io/idx_file.h"

#include <cerrno>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "sluice/core/status_macros.h"

namespace sluice::io {

absl::StatusOr<IdxHeader> ReadIdxHeader(const RandomAccessFile& file, int expected_rank) {
  uint8_t magic[4] = {0, 0, 0, 0};
  SLUICE_ASSIGN_OR_RETURN(size_t got, file.Read(0, 4, magic));
  const uint32_t expected_magic = 0x00000800u | static_cast<uint32_t>(expected_rank);
  const uint32_t magic_value =
      (uint32_t{magic[0]} << 24) | (uint32_t{magic[1]} << 16) | (uint32_t{magic[2]} << 8) | magic[3];
  if (got < 4) {
    return absl::InvalidArgumentError(
        absl::StrFormat("not a uint8 IDX file of rank %d: %s holds %d bytes, fewer than "
                        "its 4-byte magic (empty, or cut short)",
                        expected_rank, file.path(), got));
  }
  if (magic_value != expected_magic) {
    return absl::InvalidArgumentError(
        absl::StrFormat("not a uint8 IDX file of rank %d: %s starts with 0x%08x, expected magic 0x%08x", expected_rank,
                        file.path(), magic_value, expected_magic));
  }
  IdxHeader header;
  header.data_offset = 4 + 4 * static_cast<uint64_t>(expected_rank);
  std::vector<uint8_t> raw(4 * expected_rank);
  SLUICE_RETURN_IF_ERROR(file.ReadExact(4, raw.size(), raw.data()));
  uint64_t bytes = 1, bytes_per_row = 1;
  bool overflow = false;
  for (int i = 0; i < expected_rank; ++i) {
    const uint8_t* p = raw.data() + 4 * i;
    header.dims.push_back((int64_t{p[0]} << 24) | (int64_t{p[1]} << 16) | (int64_t{p[2]} << 8) | p[3]);
    overflow |= __builtin_mul_overflow(bytes, static_cast<uint64_t>(header.dims.back()), &bytes);
    if (i > 0)
      overflow |= __builtin_mul_overflow(bytes_per_row, static_cast<uint64_t>(header.dims.back()), &bytes_per_row);
    if (i > 0 && header.dims.back() == 0) {
      return absl::DataLossError(absl::StrCat("IDX file ", file.path(), ": dimension ", i, " of its header (",
                                              absl::StrJoin(header.dims, " x "), ") is 0"));
    }
  }
  // Checked for overflow: a forged header whose product wraps around to the
  // file's size would otherwise pass.
  if (overflow) {
    return absl::DataLossError(absl::StrCat("IDX file ", file.path(), ": its header's dimensions (",
                                            absl::StrJoin(header.dims, " x "), ") overflow 64 bits"));
  }
  // A file of zero rows passes the size check with any row size: bound the
  // row, or a forged header makes readers allocate exabyte batches.
  // (A rank-0 file is one value.)
  const uint64_t row_bytes = header.dims.empty() ? 1 : header.dims[0] == 0 ? bytes_per_row : bytes / header.dims[0];
  if (row_bytes > kMaxIdxRowBytes) {
    return absl::DataLossError(absl::StrCat("IDX file ", file.path(), ": a row of its header (",
                                            absl::StrJoin(header.dims, " x "), ") holds ", row_bytes,
                                            " bytes, more than ", kMaxIdxRowBytes));
  }
  if (file.size() != header.data_offset + bytes) {
    return absl::DataLossError(absl::StrCat("IDX file ", file.path(), " has ", file.size(), " bytes, but its header (",
                                            absl::StrJoin(header.dims, " x "), ") needs ", header.data_offset + bytes));
  }
  return header;
}

std::string IdxHeaderBytes(const std::vector<int64_t>& dims) {
  std::string header = {0, 0, 0x08, static_cast<char>(dims.size())};
  for (int64_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) header.push_back(static_cast<char>(d >> shift));
  }
  return header;
}

absl::Status WriteIdxFile(const std::string& path, const std::vector<int64_t>& dims, const uint8_t* data) {
  const std::string header = IdxHeaderBytes(dims);
  uint64_t bytes = 1;
  for (int64_t d : dims) bytes *= static_cast<uint64_t>(d);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return ErrnoStatus(errno, "cannot create", path);
  const bool ok =
      std::fwrite(header.data(), 1, header.size(), f) == header.size() && std::fwrite(data, 1, bytes, f) == bytes;
  if (std::fclose(f) != 0 || !ok) return ErrnoStatus(errno, "cannot write", path);
  return absl::OkStatus();
}

}  // namespace sluice::io
