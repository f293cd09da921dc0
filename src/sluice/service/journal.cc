#include "sluice/service/journal.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/io/random_access_file.h"
#include "sluice/io/tfrecord_reader.h"

namespace sluice::service {
namespace {

// Reads every whole entry; returns the byte length they span.
absl::StatusOr<uint64_t> ReadEntries(const std::string& path, std::vector<JournalEntry>* out,
                                     std::string* warning) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return 0;  // a new journal
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<io::TfRecordReader> reader, io::TfRecordReader::Open(path));
  while (true) {
    const uint64_t offset = reader->offset();
    absl::StatusOr<std::optional<absl::string_view>> record = reader->Next();
    if (!record.ok()) {
      // Only the tail may be torn: a crash mid-append.
      if (absl::StrContains(record.status().message(), "truncated")) {
        *warning = absl::StrCat("dropped a torn last entry of ", path, " at offset ", offset);
        return offset;
      }
      return record.status();
    }
    if (!record->has_value()) return offset;
    JournalEntry entry;
    if (!entry.ParseFromArray((*record)->data(), static_cast<int>((*record)->size()))) {
      return absl::DataLossError(absl::StrCat("unreadable journal entry in ", path, " at offset ", offset));
    }
    out->push_back(std::move(entry));
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<Journal>> Journal::Open(const std::string& dir,
                                                       std::vector<JournalEntry>* replay,
                                                       std::string* warning) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return io::ErrnoStatus(errno, "cannot create work dir", dir);
  }
  const std::string path = absl::StrCat(dir, "/journal.tfrecord");
  SLUICE_ASSIGN_OR_RETURN(const uint64_t good_bytes, ReadEntries(path, replay, warning));
  if (!warning->empty() && ::truncate(path.c_str(), static_cast<off_t>(good_bytes)) != 0) {
    return io::ErrnoStatus(errno, "cannot truncate the torn tail of", path);
  }
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<io::TfRecordWriter> writer, io::TfRecordWriter::Append(path));
  return std::unique_ptr<Journal>(new Journal(path, std::move(writer)));
}

absl::Status Journal::Append(const JournalEntry& entry) {
  SLUICE_RETURN_IF_ERROR(writer_->Write(entry.SerializeAsString()));
  return writer_->Sync();
}

}  // namespace sluice::service
