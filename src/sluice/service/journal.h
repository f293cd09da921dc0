// The dispatcher's journal: its state changes as JournalEntry records in a
// TFRecord file (CRC-framed) under --work-dir, appended and synced before
// the change is acted on, and replayed on restart.
#ifndef SLUICE_SERVICE_JOURNAL_H_
#define SLUICE_SERVICE_JOURNAL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "service.pb.h"
#include "sluice/io/tfrecord_writer.h"

namespace sluice::service {

// Thread-compatible.
class Journal {
 public:
  // Opens (creating) DIR/journal.tfrecord and returns what it held in
  // *replay. A torn last record (the process died mid-write) is dropped and
  // reported in *warning; corruption before the end is DataLoss.
  static absl::StatusOr<std::unique_ptr<Journal>> Open(const std::string& dir,
                                                       std::vector<JournalEntry>* replay,
                                                       std::string* warning);
  absl::Status Append(const JournalEntry& entry);
  const std::string& path() const { return path_; }

 private:
  Journal(std::string path, std::unique_ptr<io::TfRecordWriter> writer)
      : path_(std::move(path)), writer_(std::move(writer)) {}
  std::string path_;
  std::unique_ptr<io::TfRecordWriter> writer_;
};

}  // namespace sluice::service

#endif  // SLUICE_SERVICE_JOURNAL_H_
