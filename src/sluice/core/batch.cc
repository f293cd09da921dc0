#include "sluice/core/batch.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace sluice {

absl::string_view Column::RaggedRow(int64_t r) const {
  const int64_t* off = offsets.data<int64_t>();
  return absl::string_view(reinterpret_cast<const char*>(values.raw_data()) + off[r], off[r + 1] - off[r]);
}

Column Column::Slice(int64_t begin, int64_t end) const {
  if (ragged()) return Column{values, offsets.Slice(begin, end + 1)};
  return Column{values.Slice(begin, end), Tensor()};
}

void Provenance::AddRun(int64_t first_row, int32_t file, int64_t first_record) {
  runs_.push_back(Run{first_row, file, first_record});
}

void Provenance::AddItem(int64_t row, int32_t file, int64_t record, int64_t item, ItemKind kind) {
  runs_.push_back(Run{row, file, record, item, kind});
}

void Provenance::AddRow(int64_t dst_row, const Provenance& src, int64_t src_row) {
  if (!files_) files_ = src.files_;
  const RowOrigin o = src.Origin(src_row);
  if (!runs_.empty()) {
    const Run& last = runs_.back();
    if (last.file == o.file && o.record >= 0 && o.item < 0 && last.item < 0 &&
        last.first_record + (dst_row - last.first_row) == o.record) {
      return;  // continues the current run
    }
  }
  runs_.push_back(Run{dst_row, o.file, o.record, o.item, o.item_kind});
}

RowOrigin Provenance::Origin(int64_t row) const {
  auto it =
      std::upper_bound(runs_.begin(), runs_.end(), row, [](int64_t r, const Run& run) { return r < run.first_row; });
  if (it == runs_.begin()) return RowOrigin{};
  --it;
  if (it->first_record < 0) return RowOrigin{it->file, -1};
  return RowOrigin{it->file, it->first_record + (row - it->first_row), row == it->first_row ? it->item : -1,
                   it->item_kind};
}

int64_t Provenance::SampleId(int64_t row) const {
  const RowOrigin o = Origin(row);
  if (o.file < 0 || o.record < 0) return -1;
  return SampleIdOf(o.file, o.record);
}

std::string Provenance::Describe(int64_t row) const {
  const RowOrigin o = Origin(row);
  if (!files_ || o.file < 0 || o.file >= static_cast<int32_t>(files_->size()) || o.record < 0) {
    return absl::StrCat("row ", row);
  }
  if (o.item >= 0 && o.item_kind == ItemKind::kFileRow)
    return absl::StrCat("record ", o.item, " of ", (*files_)[o.file]);
  if (o.item >= 0) return absl::StrCat("dataset[", o.item, "] (record ", o.record, " of ", (*files_)[o.file], ")");
  return absl::StrCat("record ", o.record, " of ", (*files_)[o.file]);
}

std::string Provenance::File(int64_t row) const {
  const RowOrigin o = Origin(row);
  if (!files_ || o.file < 0 || o.file >= static_cast<int32_t>(files_->size())) return "";
  return (*files_)[o.file];
}

Provenance Provenance::Slice(int64_t begin, int64_t end) const {
  Provenance out(files_);
  for (int64_t r = begin; r < end;) {
    auto it =
        std::upper_bound(runs_.begin(), runs_.end(), r, [](int64_t x, const Run& run) { return x < run.first_row; });
    if (it == runs_.begin()) break;
    const Run& run = *(it - 1);
    const int64_t record = run.first_record < 0 ? -1 : run.first_record + (r - run.first_row);
    out.runs_.push_back(Run{r - begin, run.file, record, r == run.first_row ? run.item : -1, run.item_kind});
    r = (it == runs_.end()) ? end : std::min(end, it->first_row);
  }
  return out;
}

Batch Batch::Slice(int64_t begin, int64_t end) const {
  Batch out;
  out.rows = end - begin;
  out.columns.reserve(columns.size());
  for (const Column& c : columns) out.columns.push_back(c.Slice(begin, end));
  out.provenance = provenance.Slice(begin, end);
  if (end == rows) out.provenance.SetReadThrough(provenance.ReadThrough(rows));  // the rows left out after it too
  return out;
}

size_t Batch::ByteSize() const {
  size_t bytes = 0;
  for (const Column& c : columns) {
    if (c.ragged()) {
      bytes += c.offsets.byte_size();
      const int64_t* off = c.offsets.data<int64_t>();
      bytes += off[c.offsets.num_elements() - 1] - off[0];
    } else {
      bytes += c.values.byte_size();
    }
  }
  return bytes;
}

}  // namespace sluice
