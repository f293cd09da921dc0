#include "sluice/io/tfrecord_index.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/io/crc32c.h"
#include "sluice/io/object_store.h"
#include "sluice/io/random_access_file.h"
#include "sluice/io/tfrecord_reader.h"

namespace sluice::io {
namespace {

constexpr char kMagic[8] = {'S', 'L', 'U', 'I', 'C', 'E', 'I', 'X'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 32;

void PutU32(std::string* out, uint32_t v) { out->append(reinterpret_cast<char*>(&v), 4); }
void PutU64(std::string* out, uint64_t v) { out->append(reinterpret_cast<char*>(&v), 8); }

template <typename T>
T Load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

std::string TfRecordIndexPath(const std::string& tfrecord_path) {
  // An object's URL keeps its query (the store's options) at the end.
  const size_t query = IsObjectUrl(tfrecord_path) ? tfrecord_path.find('?') : std::string::npos;
  if (query == std::string::npos) return tfrecord_path + ".index";
  return absl::StrCat(tfrecord_path.substr(0, query), ".index", tfrecord_path.substr(query));
}

absl::StatusOr<int64_t> WriteTfRecordIndex(const std::string& tfrecord_path) {
  {
    SLUICE_ASSIGN_OR_RETURN(const std::unique_ptr<RandomAccessFile> file, RandomAccessFile::Open(tfrecord_path));
    SLUICE_ASSIGN_OR_RETURN(const bool compressed, IsCompressedTfRecord(*file));
    if (compressed) {
      return absl::InvalidArgumentError(
          absl::StrCat(tfrecord_path,
                       " is compressed (GZIP or ZLIB): it is read whole, as one split (a record within it is "
                       "reached only by decompressing what comes before), so it takes no index; decompress it "
                       "to index it"));
    }
  }
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<TfRecordReader> reader, TfRecordReader::Open(tfrecord_path));
  std::vector<uint64_t> offsets;
  while (true) {
    const uint64_t offset = reader->offset();
    SLUICE_ASSIGN_OR_RETURN(std::optional<absl::string_view> record, reader->Next());
    if (!record) break;
    offsets.push_back(offset);
  }
  std::string out(kMagic, sizeof(kMagic));
  PutU32(&out, kVersion);
  PutU32(&out, 0);
  PutU64(&out, reader->offset());  // == file size after a clean read
  PutU64(&out, offsets.size());
  for (uint64_t o : offsets) PutU64(&out, o);
  PutU32(&out, MaskCrc(Crc32c(out.data(), out.size())));

  const std::string path = TfRecordIndexPath(tfrecord_path);
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return ErrnoStatus(errno, "cannot create", tmp);
  const bool ok = std::fwrite(out.data(), 1, out.size(), f) == out.size();
  const bool closed = std::fclose(f) == 0;
  // Renamed so a reader never sees a half-written index; a failure leaves
  // no temporary file behind.
  if (!ok || !closed || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(tmp.c_str());
    return ErrnoStatus(error, "cannot write", ok && closed ? path : tmp);
  }
  return static_cast<int64_t>(offsets.size());
}

absl::StatusOr<std::optional<std::vector<uint64_t>>> ReadTfRecordIndex(const std::string& tfrecord_path) {
  const std::string path = TfRecordIndexPath(tfrecord_path);
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> opened = RandomAccessFile::Open(path);
  if (absl::IsNotFound(opened.status())) return std::optional<std::vector<uint64_t>>();  // not indexed
  if (!opened.ok()) return opened.status();
  std::unique_ptr<RandomAccessFile> file = *std::move(opened);
  std::string data(file->size(), '\0');
  SLUICE_RETURN_IF_ERROR(file->ReadExact(0, data.size(), data.data()));
  auto corrupt = [&](absl::string_view why) {
    return absl::DataLossError(absl::StrCat("corrupt index ", path, ": ", why, "; re-create it with `sluice index`"));
  };
  if (data.size() < kHeaderBytes + 4 || std::memcmp(data.data(), kMagic, 8) != 0) {
    return corrupt("bad magic");
  }
  if (Load<uint32_t>(data.data() + 8) != kVersion) return corrupt("unknown version");
  const size_t body = data.size() - 4;
  if (UnmaskCrc(Load<uint32_t>(data.data() + body)) != Crc32c(data.data(), body)) {
    return corrupt("crc mismatch");
  }
  // Compared by division: 8 * count overflows for a forged count.
  const uint64_t count = Load<uint64_t>(data.data() + 24);
  if ((body - kHeaderBytes) % 8 != 0 || count != (body - kHeaderBytes) / 8) {
    return corrupt(absl::StrCat("a count of ", count, " records does not match its size of ", data.size(), " bytes"));
  }
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> records, RandomAccessFile::Open(tfrecord_path));
  const uint64_t indexed_size = Load<uint64_t>(data.data() + 16);
  if (indexed_size != records->size()) {
    return absl::FailedPreconditionError(absl::StrCat("stale index ", path, ": written for a file of ", indexed_size,
                                                      " bytes, the file has ", records->size(),
                                                      "; re-run `sluice index`"));
  }
  // The records cover the file from its first byte: an index of none for a
  // file of some would give len() 0 and splits that read nothing.
  if (count == 0 && indexed_size > 0) {
    return corrupt(absl::StrCat("it lists no record for a file of ", indexed_size, " bytes"));
  }
  std::vector<uint64_t> offsets(count);
  std::memcpy(offsets.data(), data.data() + kHeaderBytes, 8 * count);
  if (count > 0 && offsets[0] != 0) {
    return corrupt(absl::StrCat("its first record is at offset ", offsets[0], ", not at the file's start"));
  }
  for (size_t i = 0; i < offsets.size(); ++i) {
    // Each frame holds at least 16 bytes, and the splits' ranges rely on order.
    const uint64_t min_offset = i == 0 ? 0 : offsets[i - 1] + 16;
    if (offsets[i] < min_offset || offsets[i] > indexed_size - std::min<uint64_t>(indexed_size, 16)) {
      return corrupt(absl::StrCat("record ", i, "'s offset ", offsets[i], " is out of order or past the file's end"));
    }
  }
  return std::optional<std::vector<uint64_t>>(std::move(offsets));
}

}  // namespace sluice::io
