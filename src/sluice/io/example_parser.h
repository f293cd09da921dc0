// Extracts declared features from serialized tf.train.Example records.
#ifndef SLUICE_IO_EXAMPLE_PARSER_H_
#define SLUICE_IO_EXAMPLE_PARSER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace sluice::io {

enum class FeatureKind { kBytes, kInt64, kFloat };

// A bytes feature's `count` when its values may have any length (encoded
// images): the parser then points at the bytes inside the record.
inline constexpr int64_t kAnyLength = -1;

struct FeatureSpec {
  std::string name;
  FeatureKind kind = FeatureKind::kBytes;
  // Bytes: the exact length of the single value, or kAnyLength.
  // Int64/float: the exact number of values.
  int64_t count = 1;
};

// Reads the protobuf wire format directly into fixed-size outputs instead of
// building the message: protobuf's parser allocates a map node and strings
// per feature; bench/micro/parse_benchmark measures both (bench/RESULTS.md).
//
// Thread-safe (const after construction).
class ExampleParser {
 public:
  explicit ExampleParser(std::vector<FeatureSpec> features);

  // Writes feature i to out[i]: `count` bytes, int64s or floats; for a bytes
  // feature of kAnyLength, out[i] points to an absl::string_view set to the
  // value's bytes within `record` (no copy). Errors carry
  // no location; the caller prefixes the record and file:
  // NotFound for a missing feature, InvalidArgument for the wrong type or
  // length, DataLoss for bytes that are not an Example.
  absl::Status Parse(absl::string_view record, uint8_t* const* out) const;

  const std::vector<FeatureSpec>& features() const { return features_; }

 private:
  absl::Status ParseFeature(int index, const uint8_t* p, const uint8_t* end, uint8_t* out) const;
  // The declared feature named `key`, or -1.
  int Find(absl::string_view key) const;
  std::vector<FeatureSpec> features_;
  // By name, for Examples of many features (a few are compared directly:
  // cheaper than hashing each key).
  absl::flat_hash_map<std::string, int> by_name_;
};

absl::string_view FeatureKindName(FeatureKind kind);

}  // namespace sluice::io

#endif  // SLUICE_IO_EXAMPLE_PARSER_H_
