// CRC32C (Castagnoli), as TFRecord frames and the service's batches use it:
// ISA-L's crc32_iscsi (Debian's libisal) underneath.
#ifndef SLUICE_IO_CRC32C_H_
#define SLUICE_IO_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace sluice::io {

// CRC32C of data[0, n) continuing from `crc` (0 to start).
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n);
inline uint32_t Crc32c(const void* data, size_t n) { return Crc32cExtend(0, data, n); }
// Copies src[0, n) to dst and returns the CRC32C of the bytes continuing
// from `crc`, read from the copy while it is in cache (for pieces that fit
// L2, as a stream's arrive).
uint32_t CopyAndCrc32c(uint32_t crc, void* dst, const void* src, size_t n);

// TFRecord stores masked CRCs: a CRC of a string that itself holds CRCs is
// weak, so the stored value is rotated and offset (as in leveldb's log).
inline uint32_t MaskCrc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
inline uint32_t UnmaskCrc(uint32_t masked) {
  const uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

}  // namespace sluice::io

#endif  // SLUICE_IO_CRC32C_H_
