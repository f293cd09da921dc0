#include "sluice/core/schema.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace sluice {

std::string ColumnSpec::ToString() const {
  if (ragged) return absl::StrCat(name, ": bytes");
  return absl::StrCat(name, ": ", DTypeName(dtype), shape.ToString());
}

std::optional<int> Schema::Find(absl::string_view name) const {
  for (int i = 0; i < size(); ++i) {
    if (columns_[i].name == name) return i;
  }
  return std::nullopt;
}

int Schema::Set(ColumnSpec spec) {
  if (std::optional<int> i = Find(spec.name)) {
    columns_[*i] = std::move(spec);
    return *i;
  }
  columns_.push_back(std::move(spec));
  return size() - 1;
}

int64_t Schema::RowBytes() const {
  int64_t bytes = 0;
  for (const ColumnSpec& c : columns_) bytes += c.row_bytes();
  return bytes;
}

std::string Schema::Names() const {
  return absl::StrJoin(columns_, ", ", [](std::string* out, const ColumnSpec& c) { out->append(c.name); });
}

std::string Schema::ToString() const {
  return "{" + absl::StrJoin(columns_, ", ", [](std::string* out, const ColumnSpec& c) { out->append(c.ToString()); }) +
         "}";
}

}  // namespace sluice
