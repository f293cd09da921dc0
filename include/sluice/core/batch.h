// Batch: the unit that flows between pipeline nodes. A batch holds `rows`
// samples as columns aligned with the producing node's Schema; a single
// sample is a batch of one row.
#ifndef SLUICE_CORE_BATCH_H_
#define SLUICE_CORE_BATCH_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "sluice/core/tensor.h"

namespace sluice {

// Dense: `values` is [rows, ...sample shape]. Ragged bytes: `values` is uint8
// [total] and `offsets` int64 [rows + 1] holds absolute positions in it.
struct Column {
  Tensor values;
  Tensor offsets;

  bool ragged() const { return offsets.valid(); }
  // Bytes of row r. REQUIRES: ragged().
  absl::string_view RaggedRow(int64_t r) const;
  // Rows [begin, end), sharing buffers.
  Column Slice(int64_t begin, int64_t end) const;
};

// What a RowOrigin's item is, for messages.
enum class ItemKind : uint8_t {
  kDatasetIndex,  // a Python dataset's: "dataset[40] (record 17 of DS)"
  kFileRow,       // a row of the file (a shuffled row group's): "record 40 of F"
};

struct RowOrigin {
  int32_t file = -1;
  int64_t record = -1;
  // The item of the source's own numbering the record is, where the two
  // differ (a shuffled Python dataset's record r is its dataset[item], a
  // shuffled row group's its row item of the file); -1 elsewhere. For
  // messages only: not carried by the service.
  int64_t item = -1;
  ItemKind item_kind = ItemKind::kDatasetIndex;
};

// A sample's identity, (file << 40) | record (Provenance::SampleId).
inline int64_t SampleIdOf(int32_t file, int64_t record) { return (int64_t{file} << 40) | record; }

// Where each row came from, kept as runs of consecutive records so that the
// common case (rows in file order) costs one entry per chunk. Used only to
// name the file and record in error messages and to key each sample's
// random draws by its identity.
class Provenance {
 public:
  Provenance() = default;
  explicit Provenance(std::shared_ptr<const std::vector<std::string>> files) : files_(std::move(files)) {}

  // Rows from `first_row` on come from consecutive records of `file`,
  // starting at `first_record`. Runs are added in increasing row order.
  void AddRun(int64_t first_row, int32_t file, int64_t first_record);
  // Row `row` comes from record `record` of `file`, its item `item` (RowOrigin::item).
  void AddItem(int64_t row, int32_t file, int64_t record, int64_t item, ItemKind kind = ItemKind::kDatasetIndex);
  // Appends row `src_row` of `src` as row `dst_row` (gathers: shuffle, filter).
  void AddRow(int64_t dst_row, const Provenance& src, int64_t src_row);

  RowOrigin Origin(int64_t row) const;
  // The row's sample identity, (file << 40) | record, stable across epochs,
  // orders, threads and machines; -1 when the origin is unknown.
  int64_t SampleId(int64_t row) const;
  // "record 17 of /d/train-0.tfrecord", "dataset[40] (record 17 of DS)"
  // where it has an item, or "row 17" when unknown.
  std::string Describe(int64_t row) const;
  // The row's file, or "" when unknown.
  std::string File(int64_t row) const;
  Provenance Slice(int64_t begin, int64_t end) const;

  // Input rows after the last row were read and left out (a skipping
  // map's refusals), the last of them from `consumed`: where reading
  // stands after the last row, so a resume starts after them, not at them
  // (before a map, a batch regrouped from there).
  void SetReadThrough(RowOrigin consumed) { read_through_ = consumed; }
  // The origin of the last row read into the element of `rows` rows: the
  // last left out after it, or its last row's.
  RowOrigin ReadThrough(int64_t rows) const { return read_through_.file >= 0 ? read_through_ : Origin(rows - 1); }

 private:
  struct Run {
    int64_t first_row;
    int32_t file;
    int64_t first_record;
    int64_t item = -1;  // of a run of one row (AddItem)
    ItemKind item_kind = ItemKind::kDatasetIndex;
  };
  std::shared_ptr<const std::vector<std::string>> files_;
  std::vector<Run> runs_;
  RowOrigin read_through_;  // unset: the last row's origin
};

struct Batch {
  int64_t rows = 0;
  std::vector<Column> columns;
  Provenance provenance;

  // Rows [begin, end), sharing buffers.
  Batch Slice(int64_t begin, int64_t end) const;
  // Bytes held by the columns' views.
  size_t ByteSize() const;
};

}  // namespace sluice

#endif  // SLUICE_CORE_BATCH_H_
