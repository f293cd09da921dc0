#include "sluice/io/cifar_source.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/io/fixed_record_reader.h"
#include "sluice/io/random_access_file.h"

namespace sluice::io {
namespace {

constexpr int64_t kPixels = 1024;

class CifarSplitReader : public FixedRecordSplitReader {
 public:
  CifarSplitReader(const RandomAccessFile& file, Split split) : FixedRecordSplitReader(split), file_(file) {}

 protected:
  absl::Status ReadRecords(int64_t first, int64_t n, int64_t row, BatchBuilder* out) override {
    raw_.resize(n * kCifarRecordBytes);
    SLUICE_RETURN_IF_ERROR(file_.ReadExact(first * kCifarRecordBytes, raw_.size(), raw_.data()));
    uint8_t* images = out->dense(0) + row * 3 * kPixels;
    int64_t* labels = reinterpret_cast<int64_t*>(out->dense(1)) + row;
    for (int64_t i = 0; i < n; ++i) {
      const uint8_t* rec = raw_.data() + i * kCifarRecordBytes;
      labels[i] = rec[0];
      uint8_t* img = images + i * 3 * kPixels;
      for (int64_t p = 0; p < kPixels; ++p) {  // planar CHW -> interleaved HWC
        img[3 * p + 0] = rec[1 + p];
        img[3 * p + 1] = rec[1 + kPixels + p];
        img[3 * p + 2] = rec[1 + 2 * kPixels + p];
      }
    }
    return absl::OkStatus();
  }

 private:
  const RandomAccessFile& file_;
  std::vector<uint8_t> raw_;  // reused across reads
};

class Cifar10Source : public SourceFormat {
 public:
  Cifar10Source(std::vector<std::unique_ptr<RandomAccessFile>> files, std::vector<std::string> paths,
                int64_t split_records)
      : files_(std::move(files)),
        paths_(std::make_shared<const std::vector<std::string>>(std::move(paths))),
        split_records_(split_records),
        schema_({ColumnSpec{"image", DType::kUInt8, Shape{32, 32, 3}}, ColumnSpec{"label", DType::kInt64, Shape{}}}) {}

  const Schema& schema() const override { return schema_; }
  const std::shared_ptr<const std::vector<std::string>>& files() const override { return paths_; }
  std::vector<Split> MakeSplits() const override {
    std::vector<int64_t> records;
    for (const auto& f : files_) records.push_back(static_cast<int64_t>(f->size()) / kCifarRecordBytes);
    return MakeRecordSplits(records, split_records_);
  }
  bool SeeksRecords() const override { return true; }
  int64_t SplitPoolBytes(const Split& split) const override { return split.records() * schema_.RowBytes(); }
  absl::StatusOr<std::unique_ptr<SplitReader>> OpenSplit(const Split& split, CorruptionLog*) const override {
    return std::unique_ptr<SplitReader>(new CifarSplitReader(*files_[split.file], split));
  }

 private:
  std::vector<std::unique_ptr<RandomAccessFile>> files_;
  std::shared_ptr<const std::vector<std::string>> paths_;
  int64_t split_records_;
  Schema schema_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<SourceFormat>> MakeCifar10Source(const std::vector<std::string>& patterns,
                                                                int64_t split_records) {
  SLUICE_ASSIGN_OR_RETURN(std::vector<std::string> paths, ExpandFilePatterns(patterns));
  std::vector<std::unique_ptr<RandomAccessFile>> files;
  for (const std::string& path : paths) {
    SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, RandomAccessFile::Open(path));
    if (file->size() == 0 || file->size() % kCifarRecordBytes != 0) {
      return absl::DataLossError(absl::StrCat("not a CIFAR-10 binary file: ", path, " has ", file->size(),
                                              " bytes, not a positive multiple of the 3073-byte record"));
    }
    files.push_back(std::move(file));
  }
  return std::unique_ptr<SourceFormat>(new Cifar10Source(std::move(files), std::move(paths), split_records));
}

}  // namespace sluice::io
