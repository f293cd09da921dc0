// Writes TFRecord files (the framing TfRecordReader reads, with both CRCs).
#ifndef SLUICE_IO_TFRECORD_WRITER_H_
#define SLUICE_IO_TFRECORD_WRITER_H_

#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sluice::io {

// Appends `record` framed as a TFRecord (length, its CRC, data, its CRC) to
// *out, for writers of their own (the dispatcher's journal).
void AppendTfRecordFrame(absl::string_view record, std::string* out);

// Thread-compatible. Close() reports write errors; the destructor closes
// silently if Close() was not called.
class TfRecordWriter {
 public:
  static absl::StatusOr<std::unique_ptr<TfRecordWriter>> Create(const std::string& path);
  ~TfRecordWriter();

  absl::Status Write(absl::string_view record);
  absl::Status Close();

 private:
  TfRecordWriter(std::string path, std::FILE* file) : path_(std::move(path)), file_(file) {}
  std::string path_;
  std::FILE* file_;
  std::string frame_;  // reused: one write per record
};

}  // namespace sluice::io

#endif  // SLUICE_IO_TFRECORD_WRITER_H_
