// Writes TFRecord files (the framing TfRecordReader reads, with both CRCs).
#ifndef SLUICE_IO_TFRECORD_WRITER_H_
#define SLUICE_IO_TFRECORD_WRITER_H_

#include <cstdio>
#include <memory>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace sluice::io {

// Thread-compatible. Close() reports write errors; the destructor closes
// silently if Close() was not called.
class TfRecordWriter {
 public:
  static absl::StatusOr<std::unique_ptr<TfRecordWriter>> Create(const std::string& path);
  // Opens `path` to add records at its end (creating it if missing).
  static absl::StatusOr<std::unique_ptr<TfRecordWriter>> Append(const std::string& path);
  ~TfRecordWriter();

  absl::Status Write(absl::string_view record);
  // Makes what was written durable (fflush + fdatasync), for journals.
  absl::Status Sync();
  absl::Status Close();

 private:
  friend absl::StatusOr<std::unique_ptr<TfRecordWriter>> OpenWriter(const std::string&, const char*);
  TfRecordWriter(std::string path, std::FILE* file) : path_(std::move(path)), file_(file) {}
  std::string path_;
  std::FILE* file_;
};

}  // namespace sluice::io

#endif  // SLUICE_IO_TFRECORD_WRITER_H_
