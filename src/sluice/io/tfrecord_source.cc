#include "sluice/io/tfrecord_source.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "sluice/core/status_macros.h"
#include "sluice/io/gzip_file.h"
#include "sluice/io/random_access_file.h"
#include "sluice/io/tfrecord_index.h"
#include "sluice/io/tfrecord_reader.h"

namespace sluice::io {
namespace {

class TfRecordSplitReader : public SplitReader {
 public:
  // Reads records up to `end_record` (-1: the file's end).
  TfRecordSplitReader(std::unique_ptr<TfRecordReader> reader, int32_t file, int64_t end_record)
      : reader_(std::move(reader)), file_(file), end_record_(end_record) {}

  absl::StatusOr<int64_t> Read(int64_t max_rows, BatchBuilder* out) override {
    max_rows = std::min(max_rows, Left());
    int64_t n = 0;
    int64_t last_index = -2;
    while (n < max_rows && !out->RaggedFull()) {
      SLUICE_ASSIGN_OR_RETURN(std::optional<absl::string_view> record, reader_->Next());
      if (!record) break;
      // Skipped corrupt records leave gaps: start a new provenance run there.
      const int64_t index = reader_->record_index() - 1;
      if (index != last_index + 1) out->provenance().AddRun(out->rows() + n, file_, index);
      last_index = index;
      out->AppendBytes(0, *record);
      ++n;
    }
    out->AddRows(n);
    return n;
  }

  // Passes over records by their headers (a corrupt one skipped under
  // on_corrupt "skip" counts as one of them).
  absl::StatusOr<int64_t> Skip(int64_t max_rows) override {
    const int64_t before = reader_->record_index();
    SLUICE_RETURN_IF_ERROR(reader_->Skip(std::min(max_rows, Left())));
    return reader_->record_index() - before;
  }

 private:
  // Records left before end_record_. An indexed file's reader also stops at
  // its offset; an unindexed one counts (a damaged stretch counts as one).
  int64_t Left() const {
    if (end_record_ < 0) return std::numeric_limits<int64_t>::max();
    return std::max<int64_t>(0, end_record_ - reader_->record_index());
  }

  std::unique_ptr<TfRecordReader> reader_;
  int32_t file_;
  int64_t end_record_;
};

// The reader of a file skipped whole.
class NothingLeft : public SplitReader {
 public:
  absl::StatusOr<int64_t> Read(int64_t, BatchBuilder*) override { return 0; }
  absl::StatusOr<int64_t> Skip(int64_t) override { return 0; }
};

class TfRecordSource : public SourceFormat {
 public:
  TfRecordSource(std::vector<std::string> files, std::vector<std::vector<uint64_t>> offsets, int64_t split_records)
      : files_(std::make_shared<const std::vector<std::string>>(std::move(files))),
        offsets_(std::move(offsets)),
        split_records_(split_records),
        schema_({ColumnSpec{kRecordColumn, DType::kUInt8, Shape(), /*ragged=*/true}}) {}

  const Schema& schema() const override { return schema_; }
  const std::shared_ptr<const std::vector<std::string>>& files() const override { return files_; }

  std::vector<Split> MakeSplits() const override {
    std::vector<Split> splits;
    for (size_t f = 0; f < files_->size(); ++f) {
      const int64_t records = static_cast<int64_t>(offsets_[f].size());
      if (records == 0) {  // not indexed: the whole file
        splits.push_back(Split{static_cast<int32_t>(f), 0, -1});
        continue;
      }
      for (const Split& s : MakeRecordSplits({records}, split_records_)) {
        splits.push_back(Split{static_cast<int32_t>(f), s.begin_record, s.end_record});
      }
    }
    return splits;
  }

  // A file read whole (split_records 0) counts by its index, if it has
  // one; read once (len() asks at every call, the files may be objects).
  int64_t CountRecords(const Split& split) const override {
    if (split.records() >= 0) return split.records();
    absl::MutexLock lock(&counted_mu_);
    auto [it, added] = counted_.try_emplace(split.file, -1);
    if (!added) return it->second;
    absl::StatusOr<std::optional<std::vector<uint64_t>>> index = ReadTfRecordIndex((*files_)[split.file]);
    if (index.ok() && index->has_value()) it->second = static_cast<int64_t>((**index).size());
    return it->second;
  }

  // Indexed files seek to a record (files read whole too, where they have
  // an index); others pass over the records before it by their headers.
  bool SeeksRecords() const override { return true; }

  std::string FileReadFromStart(const Split& split) const override {
    return split.begin_record == 0 ? (*files_)[split.file] : "";
  }

  absl::StatusOr<std::unique_ptr<SplitReader>> OpenSplit(const Split& split, CorruptionLog* skip_log) const override {
    TfRecordReader::Options options;
    options.skip_log = skip_log;
    const std::vector<uint64_t>& offsets = offsets_[split.file];
    if (!offsets.empty()) options.record_offsets = &offsets;
    absl::StatusOr<std::unique_ptr<TfRecordReader>> opened = TfRecordReader::Open((*files_)[split.file], options);
    if (!opened.ok() && GzipFile::IsDamage(opened.status()) && skip_log != nullptr) {
      // A compressed file whose data is damaged: none of it is read. How
      // many records it holds is unknown; it counts as one.
      const std::string& path = (*files_)[split.file];
      absl::StatusOr<std::unique_ptr<RandomAccessFile>> file = RandomAccessFile::Open(path);
      const uint64_t bytes = file.ok() ? (**file).size() : 0;
      skip_log->Add(path, 1, bytes,
                    absl::StrCat(opened.status().message(), " (skipped the whole file, ", bytes,
                                 " compressed bytes, whose records are not counted: it counts as one)"));
      return std::unique_ptr<SplitReader>(new NothingLeft());
    }
    if (!opened.ok()) return opened.status();
    std::unique_ptr<TfRecordReader> reader = *std::move(opened);
    // A record range: from its first record's offset to the next range's.
    if (split.begin_record > 0 && !offsets.empty()) reader->Seek(offsets[split.begin_record], split.begin_record);
    if (split.begin_record > 0 && offsets.empty()) {
      if (const std::optional<uint64_t> at = IndexedOffset(split, skip_log != nullptr)) {
        reader->Seek(*at, split.begin_record);
      } else {
        SLUICE_RETURN_IF_ERROR(reader->Skip(split.begin_record));
      }
    }
    if (split.end_record >= 0 && split.end_record < static_cast<int64_t>(offsets.size())) {
      reader->SetEnd(offsets[split.end_record]);
    }
    return std::unique_ptr<SplitReader>(new TfRecordSplitReader(std::move(reader), split.file, split.end_record));
  }

 private:
  // Where record `split.begin_record` of a file read whole (a resumed
  // split) starts, from the file's index when it has a good one, else
  // nullopt. Not while corrupt records are skipped: reading counts a
  // damaged stretch as one record, so its numbers and the index's part
  // after one. W2 resumed 6,144 records into a file passed over 19 MB.
  std::optional<uint64_t> IndexedOffset(const Split& split, bool skipping) const {
    if (skipping) return std::nullopt;
    absl::StatusOr<std::optional<std::vector<uint64_t>>> index = ReadTfRecordIndex((*files_)[split.file]);
    if (!index.ok() || !index->has_value() || (**index).size() <= static_cast<size_t>(split.begin_record)) {
      return std::nullopt;
    }
    return (**index)[split.begin_record];
  }

  std::shared_ptr<const std::vector<std::string>> files_;
  // Record offsets per file; empty for files read whole.
  std::vector<std::vector<uint64_t>> offsets_;
  int64_t split_records_;
  Schema schema_;
  mutable absl::Mutex counted_mu_;
  mutable std::map<int32_t, int64_t> counted_ ABSL_GUARDED_BY(counted_mu_);  // CountRecords' answers by file
};

}  // namespace

absl::StatusOr<std::unique_ptr<SourceFormat>> MakeTfRecordSource(const std::vector<std::string>& patterns,
                                                                 int64_t split_records) {
  SLUICE_ASSIGN_OR_RETURN(std::vector<std::string> files, ExpandFilePatterns(patterns));
  std::vector<std::vector<uint64_t>> offsets(files.size());
  if (split_records > 0) {
    for (size_t f = 0; f < files.size(); ++f) {
      SLUICE_ASSIGN_OR_RETURN(std::optional<std::vector<uint64_t>> index, ReadTfRecordIndex(files[f]));
      if (index) offsets[f] = std::move(*index);
    }
  }
  return std::unique_ptr<SourceFormat>(new TfRecordSource(std::move(files), std::move(offsets), split_records));
}

}  // namespace sluice::io
