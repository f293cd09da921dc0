#include "sluice/io/mnist_source.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/io/fixed_record_reader.h"
#include "sluice/io/idx_file.h"

namespace sluice::io {
namespace {

struct IdxPair {
  std::shared_ptr<RandomAccessFile> images;
  std::shared_ptr<RandomAccessFile> labels;
  IdxHeader image_header;
  IdxHeader label_header;
  int64_t image_bytes;  // per record
  // The images file mapped, when it can be: chunks then view the page
  // cache instead of copying it (a tenth of W1's CPU went to that copy).
  std::shared_ptr<const FileMapping> mapped_images;
};

class MnistSplitReader : public FixedRecordSplitReader {
 public:
  MnistSplitReader(const IdxPair& pair, Split split) : FixedRecordSplitReader(split), pair_(pair) {}

  bool views() const override { return pair_.mapped_images != nullptr; }

 protected:
  absl::StatusOr<std::vector<Column>> ViewRecords(int64_t first, int64_t n) override {
    const uint64_t offset = pair_.image_header.data_offset + first * pair_.image_bytes;
    const uint64_t bytes = n * pair_.image_bytes;
    SLUICE_RETURN_IF_ERROR(pair_.images->CheckHolds(offset + bytes));
    std::vector<Column> columns(2);
    const std::shared_ptr<const FileMapping>& map = pair_.mapped_images;
    columns[0].values =
        Tensor(DType::kUInt8, Shape{n, pair_.image_header.dims[1], pair_.image_header.dims[2]},
               Buffer::AdoptReadOnly(map->data() + offset, bytes, std::const_pointer_cast<FileMapping>(map)));
    columns[1].values = Tensor::Allocate(DType::kInt64, Shape{n});
    SLUICE_RETURN_IF_ERROR(ReadLabels(first, n, columns[1].values.data<int64_t>()));
    return columns;
  }

  absl::Status ReadRecords(int64_t first, int64_t n, int64_t row, BatchBuilder* out) override {
    SLUICE_RETURN_IF_ERROR(pair_.images->ReadExact(pair_.image_header.data_offset + first * pair_.image_bytes,
                                                   n * pair_.image_bytes, out->dense(0) + row * pair_.image_bytes));
    return ReadLabels(first, n, reinterpret_cast<int64_t*>(out->dense(1)) + row);
  }

 private:
  absl::Status ReadLabels(int64_t first, int64_t n, int64_t* dst) {
    labels_.resize(n);
    SLUICE_RETURN_IF_ERROR(pair_.labels->ReadExact(pair_.label_header.data_offset + first, n, labels_.data()));
    for (int64_t i = 0; i < n; ++i) dst[i] = labels_[i];
    return absl::OkStatus();
  }

  const IdxPair& pair_;
  std::vector<uint8_t> labels_;  // reused across reads
};

class MnistSource : public SourceFormat {
 public:
  MnistSource(IdxPair pair, std::vector<std::string> files, int64_t split_records)
      : pair_(std::move(pair)),
        files_(std::make_shared<const std::vector<std::string>>(std::move(files))),
        split_records_(split_records),
        schema_({ColumnSpec{"image", DType::kUInt8, Shape{pair_.image_header.dims[1], pair_.image_header.dims[2]}},
                 ColumnSpec{"label", DType::kInt64, Shape{}}}) {}

  const Schema& schema() const override { return schema_; }
  const std::shared_ptr<const std::vector<std::string>>& files() const override { return files_; }
  std::vector<Split> MakeSplits() const override {
    return MakeRecordSplits({pair_.image_header.dims[0]}, split_records_);
  }
  bool SeeksRecords() const override { return true; }
  absl::StatusOr<std::unique_ptr<SplitReader>> OpenSplit(const Split& split, CorruptionLog*) const override {
    return std::unique_ptr<SplitReader>(new MnistSplitReader(pair_, split));
  }

 private:
  IdxPair pair_;
  std::shared_ptr<const std::vector<std::string>> files_;
  int64_t split_records_;
  Schema schema_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<SourceFormat>> MakeMnistSource(const std::string& images, const std::string& labels,
                                                              int64_t split_records) {
  IdxPair pair;
  SLUICE_ASSIGN_OR_RETURN(pair.images, RandomAccessFile::Open(images));
  SLUICE_ASSIGN_OR_RETURN(pair.labels, RandomAccessFile::Open(labels));
  SLUICE_ASSIGN_OR_RETURN(pair.image_header, ReadIdxHeader(*pair.images, 3));
  SLUICE_ASSIGN_OR_RETURN(pair.label_header, ReadIdxHeader(*pair.labels, 1));
  if (pair.image_header.dims[0] != pair.label_header.dims[0]) {
    return absl::InvalidArgumentError(absl::StrCat("MNIST files disagree: ", images, " has ", pair.image_header.dims[0],
                                                   " images but ", labels, " has ", pair.label_header.dims[0],
                                                   " labels"));
  }
  pair.image_bytes = pair.image_header.dims[1] * pair.image_header.dims[2];
  absl::StatusOr<std::shared_ptr<const FileMapping>> mapped = pair.images->Map();
  if (mapped.ok()) pair.mapped_images = *std::move(mapped);  // else read with pread
  return std::unique_ptr<SourceFormat>(new MnistSource(std::move(pair), {images, labels}, split_records));
}

}  // namespace sluice::io
