#include "sluice/io/example_parser.h"

#include <cstring>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"

namespace sluice::io {
namespace {

enum WireType { kVarint = 0, kFixed64 = 1, kLen = 2, kFixed32 = 5 };

bool ReadVarint(const uint8_t*& p, const uint8_t* end, uint64_t* v) {
  uint64_t result = 0;
  for (int shift = 0; shift < 64 && p < end; shift += 7) {
    const uint8_t b = *p++;
    result |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) {
      *v = result;
      return true;
    }
  }
  return false;
}

absl::Status Malformed(absl::string_view what) {
  return absl::DataLossError(absl::StrCat("malformed tf.train.Example: ", what));
}

// One field: its number, wire type and (for kLen) payload.
struct Field {
  uint32_t number;
  int wire_type;
  uint64_t varint;
  const uint8_t* data;
  size_t size;
};

// Reads the next field at p, advancing past it.
absl::Status NextField(const uint8_t*& p, const uint8_t* end, Field* f) {
  uint64_t tag;
  if (!ReadVarint(p, end, &tag)) return Malformed("bad tag");
  f->number = static_cast<uint32_t>(tag >> 3);
  f->wire_type = static_cast<int>(tag & 7);
  switch (f->wire_type) {
    case kVarint:
      if (!ReadVarint(p, end, &f->varint)) return Malformed("bad varint");
      return absl::OkStatus();
    case kFixed64:
      if (end - p < 8) return Malformed("truncated fixed64");
      f->data = p;
      p += 8;
      return absl::OkStatus();
    case kFixed32:
      if (end - p < 4) return Malformed("truncated fixed32");
      f->data = p;
      p += 4;
      return absl::OkStatus();
    case kLen: {
      uint64_t len;
      if (!ReadVarint(p, end, &len) || len > static_cast<uint64_t>(end - p)) {
        return Malformed("bad length");
      }
      f->data = p;
      f->size = static_cast<size_t>(len);
      p += len;
      return absl::OkStatus();
    }
    default:
      return Malformed(absl::StrCat("unsupported wire type ", f->wire_type));
  }
}

const char* ListName(uint32_t number) {
  switch (number) {
    case 1:
      return "bytes";
    case 2:
      return "float32";
    case 3:
      return "int64";
    default:
      return "no value";
  }
}

}  // namespace

absl::string_view FeatureKindName(FeatureKind kind) {
  switch (kind) {
    case FeatureKind::kBytes:
      return "bytes";
    case FeatureKind::kInt64:
      return "int64";
    case FeatureKind::kFloat:
      return "float32";
  }
  return "?";
}

constexpr size_t kComparedFeatures = 8;

ExampleParser::ExampleParser(std::vector<FeatureSpec> features) : features_(std::move(features)) {
  if (features_.size() <= kComparedFeatures) return;
  for (size_t i = 0; i < features_.size(); ++i) by_name_.emplace(features_[i].name, static_cast<int>(i));
}

int ExampleParser::Find(absl::string_view key) const {
  if (!by_name_.empty()) {
    const auto it = by_name_.find(key);
    return it == by_name_.end() ? -1 : it->second;
  }
  for (size_t i = 0; i < features_.size(); ++i) {
    if (features_[i].name == key) return static_cast<int>(i);
  }
  return -1;
}

absl::Status ExampleParser::Parse(absl::string_view record, uint8_t* const* out) const {
  // Inline storage: no heap allocation per record.
  absl::InlinedVector<bool, 32> seen(features_.size(), false);
  const uint8_t* p = reinterpret_cast<const uint8_t*>(record.data());
  const uint8_t* const end = p + record.size();
  Field f;
  while (p < end) {  // Example
    SLUICE_RETURN_IF_ERROR(NextField(p, end, &f));
    if (f.number != 1 || f.wire_type != kLen) continue;
    const uint8_t* q = f.data;
    const uint8_t* const q_end = f.data + f.size;
    while (q < q_end) {  // Features
      SLUICE_RETURN_IF_ERROR(NextField(q, q_end, &f));
      if (f.number != 1 || f.wire_type != kLen) continue;
      const uint8_t* e = f.data;
      const uint8_t* const e_end = f.data + f.size;
      absl::string_view key;
      const uint8_t* value = nullptr;
      const uint8_t* value_end = nullptr;
      while (e < e_end) {  // map entry {key = 1, value = 2}
        SLUICE_RETURN_IF_ERROR(NextField(e, e_end, &f));
        if (f.wire_type != kLen) continue;
        if (f.number == 1) key = absl::string_view(reinterpret_cast<const char*>(f.data), f.size);
        if (f.number == 2) {
          value = f.data;
          value_end = f.data + f.size;
        }
      }
      const int i = Find(key);
      if (i < 0) continue;
      static const uint8_t kEmpty = 0;
      if (value == nullptr) value = value_end = &kEmpty;
      SLUICE_RETURN_IF_ERROR(ParseFeature(i, value, value_end, out[i]));
      seen[i] = true;
    }
  }
  for (size_t i = 0; i < features_.size(); ++i) {
    if (!seen[i]) {
      return absl::NotFoundError(absl::StrCat("feature '", features_[i].name, "' missing"));
    }
  }
  return absl::OkStatus();
}

namespace {

// A BytesList's one value: copied into `out`, or (a feature of any length)
// its view.
absl::Status ParseBytesList(const FeatureSpec& spec, const uint8_t* list, const uint8_t* list_end, uint8_t* out) {
  Field f;
  int64_t n = 0, got_bytes = -1;
  while (list < list_end) {
    SLUICE_RETURN_IF_ERROR(NextField(list, list_end, &f));
    if (f.number != 1 || f.wire_type != kLen) continue;
    if (++n > 1) continue;
    got_bytes = static_cast<int64_t>(f.size);
    if (spec.count == kAnyLength) {
      *reinterpret_cast<absl::string_view*>(out) = absl::string_view(reinterpret_cast<const char*>(f.data), f.size);
    } else if (got_bytes == spec.count) {
      std::memcpy(out, f.data, f.size);
    }
  }
  if (n != 1) {
    return absl::InvalidArgumentError(absl::StrCat("feature '", spec.name, "': expected 1 bytes value, got ", n));
  }
  if (spec.count != kAnyLength && got_bytes != spec.count) {
    return absl::InvalidArgumentError(
        absl::StrCat("feature '", spec.name, "': expected ", spec.count, " bytes, got ", got_bytes));
  }
  return absl::OkStatus();
}

// An Int64List's or a FloatList's values, packed or not, into `out` (at
// most spec.count of them); *n counts all the list holds.
absl::Status ParseInt64List(const FeatureSpec& spec, const uint8_t* list, const uint8_t* list_end, uint8_t* out,
                            int64_t* n) {
  int64_t* dst = reinterpret_cast<int64_t*>(out);
  Field f;
  while (list < list_end) {
    SLUICE_RETURN_IF_ERROR(NextField(list, list_end, &f));
    if (f.number != 1) continue;
    if (f.wire_type == kVarint) {
      if (*n < spec.count) dst[*n] = static_cast<int64_t>(f.varint);
      ++*n;
    } else if (f.wire_type == kLen) {  // packed
      const uint8_t* v = f.data;
      const uint8_t* v_end = f.data + f.size;
      while (v < v_end) {
        uint64_t x;
        if (!ReadVarint(v, v_end, &x)) return Malformed("bad packed int64");
        if (*n < spec.count) dst[*n] = static_cast<int64_t>(x);
        ++*n;
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ParseFloatList(const FeatureSpec& spec, const uint8_t* list, const uint8_t* list_end, uint8_t* out,
                            int64_t* n) {
  Field f;
  while (list < list_end) {
    SLUICE_RETURN_IF_ERROR(NextField(list, list_end, &f));
    if (f.number != 1) continue;
    if (f.wire_type == kFixed32) {
      if (*n < spec.count) std::memcpy(out + 4 * *n, f.data, 4);
      ++*n;
    } else if (f.wire_type == kLen) {  // packed
      if (f.size % 4 != 0) return Malformed("bad packed float");
      const int64_t k = static_cast<int64_t>(f.size / 4);
      if (*n + k <= spec.count) std::memcpy(out + 4 * *n, f.data, f.size);
      *n += k;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ExampleParser::ParseFeature(int index, const uint8_t* p, const uint8_t* end, uint8_t* out) const {
  const FeatureSpec& spec = features_[index];
  // Feature is a oneof; the last list present wins, as in protobuf.
  uint32_t list_number = 0;
  const uint8_t* list = p;
  const uint8_t* list_end = p;
  Field f;
  while (p < end) {
    SLUICE_RETURN_IF_ERROR(NextField(p, end, &f));
    if (f.wire_type == kLen && f.number >= 1 && f.number <= 3) {
      list_number = f.number;
      list = f.data;
      list_end = f.data + f.size;
    }
  }
  const uint32_t expected_number = spec.kind == FeatureKind::kBytes ? 1 : spec.kind == FeatureKind::kFloat ? 2 : 3;
  if (list_number != expected_number && list_number != 0) {
    return absl::InvalidArgumentError(absl::StrCat("feature '", spec.name, "': expected ", FeatureKindName(spec.kind),
                                                   ", got ", ListName(list_number)));
  }
  if (spec.kind == FeatureKind::kBytes) return ParseBytesList(spec, list, list_end, out);
  int64_t n = 0;
  SLUICE_RETURN_IF_ERROR(spec.kind == FeatureKind::kInt64 ? ParseInt64List(spec, list, list_end, out, &n)
                                                          : ParseFloatList(spec, list, list_end, out, &n));
  if (n != spec.count) {
    return absl::InvalidArgumentError(
        absl::StrCat("feature '", spec.name, "': expected ", spec.count, " values, got ", n));
  }
  return absl::OkStatus();
}

}  // namespace sluice::io
