// Names, types and per-sample shapes of the columns a node produces.
#ifndef SLUICE_CORE_SCHEMA_H_
#define SLUICE_CORE_SCHEMA_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "sluice/core/dtype.h"
#include "sluice/core/shape.h"

namespace sluice {

struct ColumnSpec {
  std::string name;
  DType dtype = DType::kUInt8;
  // Per-sample shape (without the batch dimension). Unused when ragged.
  Shape shape;
  // Variable-length bytes per sample (e.g. a raw TFRecord record).
  bool ragged = false;

  // "image: uint8[32,32,3]" or "record: bytes".
  std::string ToString() const;
  // Bytes of one sample's value; 0 when ragged.
  int64_t row_bytes() const { return ragged ? 0 : shape.num_elements() * static_cast<int64_t>(DTypeSize(dtype)); }
};

class Schema {
 public:
  Schema() = default;
  explicit Schema(std::vector<ColumnSpec> columns) : columns_(std::move(columns)) {}

  int size() const { return static_cast<int>(columns_.size()); }
  const ColumnSpec& column(int i) const { return columns_[i]; }
  const std::vector<ColumnSpec>& columns() const { return columns_; }

  // Index of the column named `name`, if any.
  std::optional<int> Find(absl::string_view name) const;
  // Replaces the column of the same name, or appends. Returns its index.
  int Set(ColumnSpec spec);
  // "image, label".
  std::string Names() const;
  // "{image: uint8[28,28], label: int64[]}".
  std::string ToString() const;
  // The bytes of one row's dense columns (ragged columns' vary: not counted).
  int64_t RowBytes() const;

 private:
  std::vector<ColumnSpec> columns_;
};

}  // namespace sluice

#endif  // SLUICE_CORE_SCHEMA_H_
