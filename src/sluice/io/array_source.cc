#include "sluice/io/array_source.h"

#include <atomic>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "sluice/io/fixed_record_reader.h"

namespace sluice::io {
namespace {

// A column's rows, shared by the source and every batch that views them, so
// a batch may outlive the pipeline.
struct HeldColumn {
  ColumnSpec spec;
  std::shared_ptr<std::string> data;
};

// Hands out views of the arrays (chunks need no copy: the data is in
// memory already); Read copies, for callers that assemble rows themselves.
class ArraySplitReader : public FixedRecordSplitReader {
 public:
  ArraySplitReader(const std::vector<HeldColumn>& columns, Split split)
      : FixedRecordSplitReader(split), columns_(columns) {}

  bool views() const override { return true; }

 protected:
  absl::Status ReadRecords(int64_t first, int64_t n, int64_t row, BatchBuilder* out) override {
    for (size_t c = 0; c < columns_.size(); ++c) {
      const int64_t row_bytes = columns_[c].spec.row_bytes();
      std::memcpy(out->dense(static_cast<int>(c)) + row * row_bytes, columns_[c].data->data() + first * row_bytes,
                  n * row_bytes);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<Column>> ViewRecords(int64_t first, int64_t n) override {
    std::vector<Column> out(columns_.size());
    for (size_t c = 0; c < columns_.size(); ++c) {
      const HeldColumn& held = columns_[c];
      const int64_t row_bytes = held.spec.row_bytes();
      // Read-only: every epoch views these rows, so the hand-over copies
      // them rather than let a consumer's in-place write reach the next.
      const auto* begin = reinterpret_cast<const uint8_t*>(held.data->data()) + first * row_bytes;
      out[c].values = Tensor(held.spec.dtype, held.spec.shape.WithLeading(n),
                             Buffer::AdoptReadOnly(begin, static_cast<size_t>(n * row_bytes), held.data));
    }
    return out;
  }

 private:
  const std::vector<HeldColumn>& columns_;
};

int64_t DataBytes(const std::vector<ArrayColumnData>& columns) {
  int64_t bytes = 0;
  for (const ArrayColumnData& c : columns) bytes += static_cast<int64_t>(c.data.size());
  return bytes;
}

std::atomic<int64_t> held_array_bytes{0};

class ArraySource : public SourceFormat {
 public:
  ArraySource(std::vector<ArrayColumnData> columns, int64_t rows, int64_t split_records)
      : rows_(rows),
        split_records_(split_records),
        files_(std::make_shared<const std::vector<std::string>>(std::vector<std::string>{"<arrays>"})),
        counted_(DataBytes(columns)) {
    std::vector<ColumnSpec> specs;
    for (ArrayColumnData& c : columns) {
      specs.push_back(c.spec);
      columns_.push_back(HeldColumn{c.spec, std::make_shared<std::string>(std::move(c.data))});
    }
    schema_ = Schema(std::move(specs));
  }

  const Schema& schema() const override { return schema_; }
  const std::shared_ptr<const std::vector<std::string>>& files() const override { return files_; }
  std::vector<Split> MakeSplits() const override { return MakeRecordSplits({rows_}, split_records_); }
  bool SeeksRecords() const override { return true; }
  absl::StatusOr<std::unique_ptr<SplitReader>> OpenSplit(const Split& split, CorruptionLog*) const override {
    return std::unique_ptr<SplitReader>(new ArraySplitReader(columns_, split));
  }

 private:
  std::vector<HeldColumn> columns_;
  int64_t rows_;
  int64_t split_records_;
  std::shared_ptr<const std::vector<std::string>> files_;
  Schema schema_;
  CountedArrayBytes counted_;
};

}  // namespace

int64_t HeldArrayBytes() { return held_array_bytes.load(std::memory_order_relaxed); }

CountedArrayBytes::CountedArrayBytes(int64_t bytes) : bytes_(bytes) {
  held_array_bytes.fetch_add(bytes_, std::memory_order_relaxed);
}

CountedArrayBytes::~CountedArrayBytes() { held_array_bytes.fetch_sub(bytes_, std::memory_order_relaxed); }

absl::StatusOr<std::unique_ptr<SourceFormat>> MakeArraySource(std::vector<ArrayColumnData> columns,
                                                              int64_t split_records) {
  if (columns.empty()) return absl::InvalidArgumentError("arrays: no columns");
  int64_t rows = -1;
  for (size_t i = 0; i < columns.size(); ++i) {
    const ColumnSpec& spec = columns[i].spec;
    const std::string where = absl::StrCat("arrays column '", spec.name, "'");
    for (size_t j = 0; j < i; ++j) {
      if (columns[j].spec.name == spec.name) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": name repeats"));
      }
    }
    const int64_t row_bytes = spec.row_bytes();
    const int64_t size = static_cast<int64_t>(columns[i].data.size());
    if (row_bytes <= 0 || size % row_bytes != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": ", size, " bytes is not a whole number of ", spec.ToString(), " rows"));
    }
    if (rows >= 0 && size / row_bytes != rows) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": ", size / row_bytes, " rows, but column '", columns[0].spec.name, "' has ", rows));
    }
    rows = size / row_bytes;
  }
  return std::unique_ptr<SourceFormat>(new ArraySource(std::move(columns), rows, split_records));
}

}  // namespace sluice::io
